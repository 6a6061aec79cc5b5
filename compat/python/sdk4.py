"""Orrery through the official Python SDK, azure-cosmos 4.x.

compat/python_test.go runs this module with `python3 -m unittest -v sdk4`
against an in-process server named by ORRERY_ENDPOINT and ORRERY_KEY, with
the SDK on PYTHONPATH (compat/python/fetch-sdk.sh). Each test is named after
what the service does; it covers what the JavaScript suite (compat/js)
covers, through this SDK's API.
"""
import os
import time
import unittest
import uuid

from azure.core import MatchConditions
from azure.cosmos import CosmosClient, PartitionKey, exceptions

ENDPOINT = os.environ["ORRERY_ENDPOINT"]
KEY = os.environ["ORRERY_KEY"]


def status_of(fn):
    """Runs fn and returns the HTTP status it failed with, or None."""
    try:
        fn()
    except exceptions.CosmosHttpResponseError as e:
        return e.status_code
    return None


class OrreryTest(unittest.TestCase):
    """One database per test class, deleted afterwards."""

    client = None
    db = None

    @classmethod
    def setUpClass(cls):
        cls.client = CosmosClient(ENDPOINT, credential=KEY)
        cls.db = cls.client.create_database("py-" + cls.__name__ + "-" + uuid.uuid4().hex[:8])

    @classmethod
    def tearDownClass(cls):
        cls.client.delete_database(cls.db)
        cls.client.__exit__(None, None, None)

    def container(self, pk="/pk", **kw):
        return self.db.create_container("c-" + uuid.uuid4().hex[:8], partition_key=PartitionKey(path=pk), **kw)


class Items(OrreryTest):
    def test_create_read_replace_upsert_delete(self):
        c = self.container()
        created = c.create_item({"id": "a", "pk": "p", "n": 1})
        self.assertEqual(created["n"], 1)
        self.assertTrue(created["_etag"].startswith('"'))
        self.assertEqual(c.read_item("a", partition_key="p")["n"], 1)
        self.assertEqual(c.replace_item("a", {"id": "a", "pk": "p", "n": 2})["n"], 2)
        self.assertEqual(c.upsert_item({"id": "a", "pk": "p", "n": 3})["n"], 3)
        self.assertEqual(c.upsert_item({"id": "b", "pk": "p", "n": 4})["n"], 4)
        c.delete_item("a", partition_key="p")
        self.assertEqual(status_of(lambda: c.read_item("a", partition_key="p")), 404)
        self.assertEqual(sorted(d["id"] for d in c.read_all_items()), ["b"])

    def test_a_second_create_of_one_id_and_partition_key_is_409(self):
        c = self.container()
        c.create_item({"id": "a", "pk": "p"})
        with self.assertRaises(exceptions.CosmosResourceExistsError) as cm:
            c.create_item({"id": "a", "pk": "p"})
        self.assertEqual(cm.exception.status_code, 409)
        c.create_item({"id": "a", "pk": "q", "n": 10})
        self.assertEqual(c.read_item("a", partition_key="q")["n"], 10)

    def test_missing_items_are_404_for_read_replace_and_delete(self):
        c = self.container()
        self.assertEqual(status_of(lambda: c.read_item("x", partition_key="p")), 404)
        self.assertEqual(status_of(lambda: c.replace_item("x", {"id": "x", "pk": "p"})), 404)
        self.assertEqual(status_of(lambda: c.delete_item("x", partition_key="p")), 404)

    def test_a_stale_etag_is_412_and_the_current_one_succeeds(self):
        c = self.container()
        v1 = c.create_item({"id": "a", "pk": "p", "n": 1})
        v2 = c.replace_item("a", dict(v1, n=2), etag=v1["_etag"], match_condition=MatchConditions.IfNotModified)
        with self.assertRaises(exceptions.CosmosAccessConditionFailedError) as cm:
            c.replace_item("a", dict(v1, n=3), etag=v1["_etag"], match_condition=MatchConditions.IfNotModified)
        self.assertEqual(cm.exception.status_code, 412)
        self.assertEqual(c.read_item("a", partition_key="p")["_etag"], v2["_etag"])

    def test_an_id_ending_with_whitespace_is_refused_by_this_sdk_and_leading_whitespace_works(self):
        # This SDK refuses such ids before sending (the service's gateway
        # would create the item and then answer 401 to every read of it).
        c = self.container()
        with self.assertRaises(ValueError):
            c.create_item({"id": "Test ", "pk": "p"})
        c.create_item({"id": " Test", "pk": "p"})
        self.assertEqual(c.read_item(" Test", partition_key="p")["id"], " Test")
        c.create_item({"id": "This is a test", "pk": "p"})
        c.delete_item("This is a test", partition_key="p")

    def test_errors_carry_activity_id_charge_and_session_token(self):
        c = self.container()
        try:
            c.read_item("missing", partition_key="p")
            self.fail("read of a missing item succeeded")
        except exceptions.CosmosResourceNotFoundError as e:
            h = e.response.headers
            self.assertTrue(h.get("x-ms-activity-id"))
            self.assertIsNotNone(h.get("x-ms-request-charge"))
            self.assertTrue(h.get("x-ms-session-token"))


class PartitionKeys(OrreryTest):
    def test_values_of_each_json_type_address_their_own_partition(self):
        c = self.container()
        for i, v in enumerate(["1", 1, True, None]):
            c.create_item({"id": "same", "pk": v, "i": i})
        for i, v in enumerate(["1", 1, True, None]):
            self.assertEqual(c.read_item("same", partition_key=v)["i"], i)
        self.assertEqual(len(list(c.read_all_items())), 4)

    def test_a_replace_is_addressed_by_the_key_in_its_body(self):
        c = self.container()
        c.create_item({"id": "a", "pk": "p"})
        self.assertEqual(status_of(lambda: c.replace_item("a", {"id": "a", "pk": "other"})), 404)
        self.assertEqual(c.read_item("a", partition_key="p")["pk"], "p")

    def test_hierarchical_keys_address_by_the_full_key_and_query_by_a_prefix(self):
        c = self.db.create_container("h-" + uuid.uuid4().hex[:8],
                                     partition_key=PartitionKey(path=["/tenant", "/user"], kind="MultiHash"))
        c.create_item({"id": "1", "tenant": "t1", "user": "u1"})
        c.create_item({"id": "2", "tenant": "t1", "user": "u2"})
        c.create_item({"id": "3", "tenant": "t2", "user": "u1"})
        self.assertEqual(c.read_item("1", partition_key=["t1", "u1"])["user"], "u1")
        self.assertEqual(status_of(lambda: c.read_item("1", partition_key=["t1", "u2"])), 404)
        ids = sorted(d["id"] for d in c.query_items("SELECT * FROM c", partition_key=["t1"]))
        self.assertEqual(ids, ["1", "2"])
        c.delete_item("1", partition_key=["t1", "u1"])
        self.assertEqual(status_of(lambda: c.read_item("1", partition_key=["t1", "u1"])), 404)


class PatchAndBatch(OrreryTest):
    def test_patch_applies_the_six_operations_and_a_false_condition_is_412(self):
        c = self.container()
        c.create_item({"id": "a", "pk": "p", "n": 1, "tags": ["x"], "old": 1, "mv": "m"})
        doc = c.patch_item("a", partition_key="p", patch_operations=[
            {"op": "add", "path": "/added", "value": 1},
            {"op": "set", "path": "/n", "value": 5},
            {"op": "replace", "path": "/tags/0", "value": "y"},
            {"op": "remove", "path": "/old"},
            {"op": "incr", "path": "/n", "value": 2},
            {"op": "move", "from": "/mv", "path": "/moved"},
        ])
        self.assertEqual((doc["n"], doc["tags"], doc["added"], doc["moved"], "old" in doc, "mv" in doc),
                         (7, ["y"], 1, "m", False, False))
        self.assertEqual(status_of(lambda: c.patch_item("a", partition_key="p", filter_predicate="FROM c WHERE c.n = 0",
                                                        patch_operations=[{"op": "set", "path": "/n", "value": 0}])), 412)
        self.assertEqual(c.read_item("a", partition_key="p")["n"], 7)

    def test_a_batch_sees_its_own_writes_and_one_failure_fails_all(self):
        c = self.container()
        results = c.execute_item_batch([
            ("create", ({"id": "a", "pk": "p", "n": 1},)),
            ("upsert", ({"id": "b", "pk": "p", "n": 2},)),
            ("read", ("a",)),
            ("replace", ("b", {"id": "b", "pk": "p", "n": 3})),
        ], partition_key="p")
        self.assertEqual([r["statusCode"] for r in results], [201, 201, 200, 200])
        with self.assertRaises(exceptions.CosmosBatchOperationError) as cm:
            c.execute_item_batch([
                ("create", ({"id": "c", "pk": "p"},)),
                ("create", ({"id": "a", "pk": "p"},)),
            ], partition_key="p")
        self.assertEqual(cm.exception.error_index, 1)
        self.assertEqual([r["statusCode"] for r in cm.exception.operation_responses], [424, 409])
        self.assertEqual(status_of(lambda: c.read_item("c", partition_key="p")), 404)


class Queries(OrreryTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.c = cls.db.create_container("q", partition_key=PartitionKey(path="/pk"))
        for i in range(10):
            cls.c.create_item({"id": str(i), "pk": "p%d" % (i % 3), "n": i})

    def test_parameters_within_one_partition(self):
        got = list(self.c.query_items("SELECT VALUE c.n FROM c WHERE c.n >= @min ORDER BY c.n",
                                      parameters=[{"name": "@min", "value": 4}], partition_key="p1"))
        self.assertEqual(got, [4, 7])

    def test_cross_partition_order_by_aggregates_and_pages(self):
        got = list(self.c.query_items("SELECT VALUE c.n FROM c ORDER BY c.n DESC", enable_cross_partition_query=True,
                                      max_item_count=3))
        self.assertEqual(got, list(range(9, -1, -1)))
        self.assertEqual(list(self.c.query_items("SELECT VALUE COUNT(1) FROM c", enable_cross_partition_query=True)), [10])
        pages = self.c.query_items("SELECT * FROM c", partition_key="p0", max_item_count=2).by_page()
        self.assertEqual([len(list(p)) for p in pages], [2, 2])

    def test_group_by_over_several_ranges_answers_whole_for_a_client_without_the_group_by_feature(self):
        # This SDK does not list GroupBy among its query features: the plan
        # has the server answer the GROUP BY for the whole container.
        c = self.db.create_container("g", partition_key=PartitionKey(path="/id"), offer_throughput=40000)
        self.assertGreaterEqual(len(list(c.read_feed_ranges())), 3)
        for i in range(40):
            c.create_item({"id": "g%d" % i, "team": "ABCD"[i % 4], "age": 10 + (i * 7) % 9})
        got = sorted(c.query_items("SELECT c.team, COUNT(1) AS n, MIN(c.age) AS lo, MAX(c.age) AS hi, SUM(c.age) AS s "
                                   "FROM c GROUP BY c.team", enable_cross_partition_query=True, max_item_count=2),
                     key=lambda r: r["team"])
        want = []
        for team in "ABCD":
            ages = [10 + (i * 7) % 9 for i in range(40) if "ABCD"[i % 4] == team]
            want.append({"team": team, "n": len(ages), "lo": min(ages), "hi": max(ages), "s": sum(ages)})
        self.assertEqual(got, want)

    def test_spatial_functions_answer_with_the_service_geography(self):
        self.c.upsert_item({"id": "geo", "pk": "p0", "loc": {"type": "Point", "coordinates": [20.0, 20.0]}})
        try:
            got = list(self.c.query_items(
                "SELECT VALUE c.id FROM c WHERE ST_DISTANCE(c.loc, {'type':'Point','coordinates':[20.1,20]}) < 20000",
                partition_key="p0"))
            self.assertEqual(got, ["geo"])
            meters = list(self.c.query_items(
                "SELECT VALUE ST_DISTANCE({'type':'Point','coordinates':[0,0]}, {'type':'Point','coordinates':[1,0]}) FROM c WHERE c.id = 'geo'",
                partition_key="p0"))
            self.assertAlmostEqual(meters[0], 111319.49079327357, places=3)
        finally:
            self.c.delete_item("geo", partition_key="p0")

    def test_the_conflicts_feed_is_empty_as_in_one_write_region(self):
        self.assertEqual(list(self.c.list_conflicts()), [])
        self.assertEqual(list(self.c.query_conflicts("SELECT * FROM c")), [])


class Search(OrreryTest):
    """Vector, full-text and hybrid search across three partition key ranges
    (30,000 RU/s), through the SDK's non-streaming ORDER BY and hybrid
    search pipelines; expected results are computed here."""

    words = ["swim", "run", "bike", "ocean", "lake", "fast", "blue", "red", "hill", "road"]

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.c = cls.db.create_container(
            "search", partition_key=PartitionKey(path="/pk"), offer_throughput=30000,
            vector_embedding_policy={"vectorEmbeddings": [
                {"path": "/v", "dataType": "float32", "dimensions": 2, "distanceFunction": "euclidean"},
                {"path": "/w", "dataType": "float32", "dimensions": 2, "distanceFunction": "cosine"}]},
            full_text_policy={"defaultLanguage": "en-US", "fullTextPaths": [{"path": "/text", "language": "en-US"}]},
            indexing_policy={"vectorIndexes": [{"path": "/v", "type": "flat"}], "fullTextIndexes": [{"path": "/text"}]})
        cls.docs = []
        for i in range(40):
            text = " ".join(cls.words[(i * 7 + k * k * 3 + k) % 10] for k in range(2 + i % 5))
            d = {"id": "d%d" % i, "pk": "p%d" % (i % 6), "v": [0.1 * i, (i * 7) % 11 * 0.1], "w": [1 + i % 3, i % 5],
                 "text": text}
            cls.docs.append(d)
            cls.c.create_item(d)

    def test_the_policies_read_back_and_a_bad_one_is_400_with_the_services_message(self):
        props = self.c.read()
        self.assertEqual(props["vectorEmbeddingPolicy"]["vectorEmbeddings"][0]["distanceFunction"], "euclidean")
        self.assertEqual(props["fullTextPolicy"]["fullTextPaths"], [{"path": "/text", "language": "en-US"}])
        self.assertEqual(props["indexingPolicy"]["vectorIndexes"], [{"path": "/v", "type": "flat"}])
        with self.assertRaises(exceptions.CosmosHttpResponseError) as cm:
            self.db.create_container("bad", partition_key=PartitionKey(path="/pk"), vector_embedding_policy={
                "vectorEmbeddings": [{"path": "/v", "dataType": "float64", "dimensions": 2, "distanceFunction": "cosine"}]})
        self.assertEqual(cm.exception.status_code, 400)
        self.assertIn("invalid DataType:float64", str(cm.exception))

    def test_vector_search_ranks_every_partition_by_the_policys_distance_function(self):
        q = [1.0, 0.5]
        dist = lambda d: ((d["v"][0] - q[0]) ** 2 + (d["v"][1] - q[1]) ** 2) ** 0.5
        got = list(self.c.query_items(
            "SELECT TOP 6 c.id, VectorDistance(c.v, @q) AS score FROM c ORDER BY VectorDistance(c.v, @q)",
            parameters=[{"name": "@q", "value": q}], enable_cross_partition_query=True, max_item_count=2))
        want = sorted((dist(d) for d in self.docs))[:6]
        self.assertEqual(len(got), 6)
        for g, w in zip(got, want):
            self.assertAlmostEqual(g["score"], w, places=9)
        # A partition key and a filter narrow the candidates first.
        got = list(self.c.query_items(
            "SELECT TOP 3 VALUE c.id FROM c WHERE c.v[0] > 1 ORDER BY VectorDistance(c.v, [1.0, 0.5])", partition_key="p2"))
        want = sorted((d for d in self.docs if d["pk"] == "p2" and d["v"][0] > 1), key=dist)[:3]
        self.assertEqual(got, [d["id"] for d in want])

    def test_full_text_contains_stems_and_rank_orders_by_bm25_over_the_container(self):
        got = sorted(self.c.query_items("SELECT VALUE c.id FROM c WHERE FullTextContains(c.text, 'lakes')",
                                        enable_cross_partition_query=True))
        self.assertEqual(got, sorted(d["id"] for d in self.docs if "lake" in d["text"].split()))
        import math
        terms = [d["text"].split() for d in self.docs]
        n, avg = len(terms), sum(len(t) for t in terms) / len(terms)
        kws = ["swim", "ocean"]
        idf = [math.log(1 + (n - h + 0.5) / (h + 0.5)) for h in (sum(1 for t in terms if k in t) for k in kws)]

        def bm25(t):
            s = 0.0
            for k, w in zip(kws, idf):
                f = t.count(k)
                if f:
                    s += w * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * len(t) / avg))
            return s
        scores = {d["id"]: bm25(t) for d, t in zip(self.docs, terms)}
        got = list(self.c.query_items("SELECT TOP 8 VALUE c.id FROM c ORDER BY RANK FullTextScore(c.text, 'swim', 'ocean')",
                                      enable_cross_partition_query=True))
        want = sorted(scores.values(), reverse=True)[:8]
        self.assertEqual(len(got), 8)
        for g, w in zip(got, want):
            self.assertAlmostEqual(scores[g], w, places=9)

    def test_rrf_puts_the_item_best_in_every_rank_first(self):
        self.c.create_item({"id": "best", "pk": "p9", "text": "swim swim", "v": [5, 5], "w": [0, 1]})
        try:
            got = list(self.c.query_items(
                "SELECT TOP 3 VALUE c.id FROM c ORDER BY RANK RRF(FullTextScore(c.text, 'swim'), VectorDistance(c.v, [5, 5]), [1, 2])",
                enable_cross_partition_query=True))
            self.assertEqual(len(got), 3)
            self.assertEqual(got[0], "best")
        finally:
            self.c.delete_item("best", partition_key="p9")


class ChangeFeed(OrreryTest):
    def test_from_the_beginning_in_order_and_from_a_continuation(self):
        c = self.container()
        c.create_item({"id": "a", "pk": "p"})
        c.create_item({"id": "b", "pk": "q"})
        c.upsert_item({"id": "a", "pk": "p", "v": 2})
        feed = c.query_items_change_feed(start_time="Beginning")
        got = sorted((d["id"], d.get("v")) for d in feed)
        self.assertEqual(got, [("a", 2), ("b", None)])
        token = c.client_connection.last_response_headers["etag"]
        c.create_item({"id": "c", "pk": "p"})
        later = [d["id"] for d in c.query_items_change_feed(continuation=token)]
        self.assertEqual(later, ["c"])
        self.assertEqual([d["id"] for d in c.query_items_change_feed(start_time="Beginning", partition_key="q")], ["b"])


class Scripts(OrreryTest):
    def test_a_stored_procedure_runs_in_its_partition_and_its_errors_keep_their_status(self):
        c = self.container()
        c.create_item({"id": "b", "pk": "p", "n": 5})
        sp = c.scripts.create_stored_procedure({"id": "double", "body": """
function double(id) {
    var coll = getContext().getCollection();
    coll.readDocument(coll.getAltLink() + "/docs/" + id, {}, function (err, doc) {
        if (err) throw err;
        doc.n *= 2;
        coll.replaceDocument(doc._self, doc, function (err, saved) {
            if (err) throw err;
            getContext().getResponse().setBody(saved.n);
        });
    });
}"""})
        self.assertEqual(c.scripts.execute_stored_procedure(sp["id"], partition_key="p", params=["b"]), 10)
        self.assertEqual(status_of(lambda: c.scripts.execute_stored_procedure("double", partition_key="p", params=["x"])), 404)

    def test_a_script_with_a_syntax_error_is_400_at_create_naming_the_line(self):
        c = self.container()
        with self.assertRaises(exceptions.CosmosHttpResponseError) as cm:
            c.scripts.create_stored_procedure({"id": "broken", "body": "function broken() {\n  var x = ;\n}"})
        self.assertEqual(cm.exception.status_code, 400)
        self.assertIn("at line 2, column 11 of broken", str(cm.exception))
        self.assertEqual(status_of(lambda: c.scripts.get_stored_procedure("broken")), 404)


class TimeToLive(OrreryTest):
    def test_an_item_expires_after_its_ttl(self):
        c = self.container(default_ttl=-1)
        c.create_item({"id": "short", "pk": "p", "ttl": 1})
        c.create_item({"id": "kept", "pk": "p"})
        self.assertEqual(c.read()["defaultTtl"], -1)
        deadline = time.time() + 10
        while status_of(lambda: c.read_item("short", partition_key="p")) != 404:
            self.assertLess(time.time(), deadline, "the item outlived its ttl by 9 s")
            time.sleep(0.2)
        self.assertEqual(c.read_item("kept", partition_key="p")["id"], "kept")


class UniqueKeys(OrreryTest):
    def test_a_second_value_of_a_unique_key_in_one_partition_is_409(self):
        c = self.container(unique_key_policy={"uniqueKeys": [{"paths": ["/email"]}]})
        c.create_item({"id": "1", "pk": "p", "email": "a@x"})
        self.assertEqual(status_of(lambda: c.create_item({"id": "2", "pk": "p", "email": "a@x"})), 409)
        c.create_item({"id": "2", "pk": "q", "email": "a@x"})
        self.assertEqual(c.read()["uniqueKeyPolicy"]["uniqueKeys"][0]["paths"], ["/email"])


class Resources(OrreryTest):
    def test_databases_and_containers_conflict_list_and_delete(self):
        self.assertEqual(status_of(lambda: self.client.create_database(self.db.id)), 409)
        c = self.container()
        self.assertEqual(status_of(lambda: self.db.create_container(c.id, partition_key=PartitionKey(path="/pk"))), 409)
        self.assertIn(c.id, [p["id"] for p in self.db.list_containers()])
        self.assertEqual(c.read()["partitionKey"]["paths"], ["/pk"])
        self.db.delete_container(c.id)
        self.assertEqual(status_of(lambda: self.db.get_container_client(c.id).read()), 404)

    def test_throughput_reads_as_created(self):
        c = self.db.create_container("tp-" + uuid.uuid4().hex[:8], partition_key=PartitionKey(path="/pk"), offer_throughput=400)
        self.assertEqual(c.get_throughput().offer_throughput, 400)


class ScriptsInQueriesAndWrites(OrreryTest):
    def test_a_udf_runs_in_a_query_and_a_pre_trigger_changes_the_write(self):
        c = self.container()
        c.scripts.create_user_defined_function({"id": "tax", "body": "function tax(n) { return n * 1.25; }"})
        c.scripts.create_trigger({"id": "stamp", "triggerType": "Pre", "triggerOperation": "Create", "body": """
function stamp() {
    var req = getContext().getRequest();
    var doc = req.getBody();
    doc.stamped = true;
    req.setBody(doc);
}"""})
        c.create_item({"id": "a", "pk": "p", "n": 8}, pre_trigger_include="stamp")
        self.assertTrue(c.read_item("a", partition_key="p")["stamped"])
        self.assertEqual(list(c.query_items("SELECT VALUE udf.tax(c.n) FROM c", partition_key="p")), [10])


class ChangeFeedAllVersions(OrreryTest):
    def test_all_versions_and_deletes_reports_creates_replaces_and_deletes(self):
        c = self.container(change_feed_policy={"retentionDuration": 10})
        start = c.query_items_change_feed(mode="AllVersionsAndDeletes")
        list(start)
        token = c.client_connection.last_response_headers["etag"]
        c.create_item({"id": "a", "pk": "p", "n": 1})
        c.replace_item("a", {"id": "a", "pk": "p", "n": 2})
        c.delete_item("a", partition_key="p")
        changes = list(c.query_items_change_feed(continuation=token, mode="AllVersionsAndDeletes"))
        self.assertEqual([ch["metadata"]["operationType"] for ch in changes], ["create", "replace", "delete"])


class UsersAndPermissions(OrreryTest):
    def test_a_read_token_reads_its_container_and_cannot_write(self):
        c = self.container()
        c.create_item({"id": "a", "pk": "p"})
        user = self.db.create_user({"id": "reader-" + uuid.uuid4().hex[:6]})
        perm = user.create_permission({"id": "read", "permissionMode": "Read", "resource": c.container_link})
        token = perm.properties["_token"]
        with CosmosClient(ENDPOINT, credential={c.container_link: token}) as limited:
            lc = limited.get_database_client(self.db.id).get_container_client(c.id)
            self.assertEqual(lc.read_item("a", partition_key="p")["id"], "a")
            self.assertEqual(status_of(lambda: lc.create_item({"id": "b", "pk": "p"})), 403)


class FeedRanges(OrreryTest):
    def test_the_feed_ranges_of_a_container_cover_its_items(self):
        c = self.container()
        for i in range(6):
            c.create_item({"id": str(i), "pk": "p%d" % i})
        ranges = list(c.read_feed_ranges())
        self.assertGreaterEqual(len(ranges), 1)
        ids = sorted(d["id"] for r in ranges for d in c.query_items_change_feed(feed_range=r, start_time="Beginning"))
        self.assertEqual(ids, [str(i) for i in range(6)])


def parse_query_metrics(header):
    """Parses x-ms-documentdb-query-metrics: name=value pairs, semicolons."""
    out = {}
    for part in header.split(";"):
        name, _, value = part.partition("=")
        out[name] = float(value)
    return out


class QueryFidelity(OrreryTest):
    def test_without_order_by_queries_and_read_all_items_list_items_in_creation_order(self):
        c = self.container()
        created = []
        for i, id_ in enumerate(["m", "c", "x", "a", "q", "b", "z", "k"]):
            pk = "p%d" % (i % 3)
            c.create_item({"id": id_, "pk": pk})
            created.append(id_ + "@" + pk)
        c.replace_item("c", {"id": "c", "pk": "p1", "v": 2})  # keeps its place
        c.delete_item("a", partition_key="p0")
        c.create_item({"id": "a", "pk": "p0"})  # moves to the end
        created.remove("a@p0")
        created.append("a@p0")
        names = lambda docs: [d["id"] + "@" + d["pk"] for d in docs]
        for size in (1, 3, 100):
            got = names(c.query_items("SELECT * FROM c", enable_cross_partition_query=True, max_item_count=size))
            self.assertEqual(got, created, "query across partitions, pages of %d" % size)
            self.assertEqual(names(c.read_all_items(max_item_count=size)), created, "read_all_items, pages of %d" % size)
        p0 = [e for e in created if e.endswith("@p0")]
        self.assertEqual(names(c.query_items("SELECT * FROM c", partition_key="p0", max_item_count=1)), p0)

    def test_query_metrics_count_what_the_page_loaded_and_returned(self):
        c = self.container(indexing_policy={"includedPaths": [{"path": "/*"}], "excludedPaths": [{"path": "/note/?"}]})
        for i in range(20):
            c.create_item({"id": "i%d" % i, "pk": "p", "n": i, "note": "n%d" % (i % 4)})
        got = list(c.query_items("SELECT * FROM c WHERE c.note = 'n1'", partition_key="p",
                                 populate_query_metrics=True, max_item_count=100))
        self.assertEqual(len(got), 5)
        m = parse_query_metrics(c.client_connection.last_response_headers["x-ms-documentdb-query-metrics"])
        self.assertEqual(m["retrievedDocumentCount"], 20)  # a scan: the filtered path is not indexed
        self.assertEqual(m["outputDocumentCount"], 5)
        self.assertEqual(m["indexUtilizationRatio"], 0.25)
        self.assertGreaterEqual(m["totalExecutionTimeInMs"], m["documentLoadTimeInMs"])
        self.assertGreater(float(c.client_connection.last_response_headers["x-ms-request-charge"]), 0)

        list(c.query_items("SELECT * FROM c WHERE c.n = 3 AND c.note = 'n3'", partition_key="p",
                           populate_query_metrics=True, populate_index_metrics=True))
        headers = c.client_connection.last_response_headers
        self.assertEqual(parse_query_metrics(headers["x-ms-documentdb-query-metrics"])["retrievedDocumentCount"], 1)
        used = headers["x-ms-cosmos-index-utilization"]  # decoded by the SDK
        self.assertEqual([e["IndexSpec"] for e in used["UtilizedSingleIndexes"]], ["/n/?"])
        self.assertEqual([e["IndexSpec"] for e in used["PotentialSingleIndexes"]], ["/note/?"])


if __name__ == "__main__":
    unittest.main()
