"""What the Python SDK (azure-cosmos 4.x) does with each fault Orrery injects.

compat/python_test.go runs this module with `python3 -m unittest -v faults4`
against an in-process server named by ORRERY_ENDPOINT and ORRERY_KEY. Each
case installs a rule of /_admin/faults that fires once (or on every attempt,
to count the SDK's attempts) on one kind of operation of its own container,
runs the operation, and checks what the SDK ended with, how many attempts the
rule faulted and whether a write whose reply was lost was applied; the
printed table is the Python column of the README's fault table. The counter
tests are the seeds' counter (001, Question 5) under replies lost after the
write committed.
"""
import base64
import datetime
import email.utils
import hashlib
import hmac
import json
import os
import time
import unittest
import urllib.parse
import uuid

import requests
from azure.core.exceptions import ServiceRequestError, ServiceResponseError
from azure.cosmos import CosmosClient, PartitionKey, exceptions
from azure.core import MatchConditions

ENDPOINT = os.environ["ORRERY_ENDPOINT"]
KEY = os.environ["ORRERY_KEY"]


def faults_admin(method, rule_id=None, body=None):
    """Sends a call on the fault rules, signed with the master key as
    resource type "faults" and link "" or "faults/{id}"."""
    link = "faults/" + rule_id if rule_id else ""
    date = email.utils.formatdate(usegmt=True)
    payload = "%s\nfaults\n%s\n%s\n\n" % (method.lower(), link, date.lower())
    sig = base64.b64encode(hmac.new(base64.b64decode(KEY), payload.encode(), hashlib.sha256).digest()).decode()
    url = ENDPOINT.rstrip("/") + "/_admin/faults" + ("/" + rule_id if rule_id else "")
    r = requests.request(method, url, data=None if body is None else json.dumps(body), headers={
        "x-ms-date": date,
        "authorization": urllib.parse.quote("type=master&ver=1.0&sig=" + sig, safe=""),
        "content-type": "application/json",
    })
    if r.status_code >= 300:
        raise AssertionError("%s /_admin/faults: %d %s" % (method, r.status_code, r.text))
    return r.json() if r.text else None


def outcome(err):
    """What an SDK call ended with: "ok", "status[/substatus]" or "conn"."""
    if err is None:
        return "ok"
    if getattr(err, "status_code", None):
        # CosmosBatchOperationError too: the status of the batch.
        sub = getattr(err, "sub_status", None)
        return "%d/%d" % (err.status_code, sub) if sub else str(err.status_code)
    if isinstance(err, (ServiceRequestError, ServiceResponseError, requests.exceptions.ConnectionError)):
        return "conn"
    return "error:" + type(err).__name__


PUT = ("function (doc) { var c = getContext().getCollection(); if (!c.createDocument(c.getSelfLink(), doc, "
       "function (err) { if (err) throw err; getContext().getResponse().setBody('ok'); })) throw new Error('not accepted'); }")

# (type, op, expected outcome, applied, extra result fields, every attempt?, attempts faulted)
CASES = [
    ("TooManyRequests", "ReadItem", "ok", False, {"retryAfter": "300ms"}),
    ("TooManyRequests", "CreateItem", "ok", True),
    ("TooManyRequests", "ReadItem", "429/3200", False, {"retryAfter": "10ms"}, True, 10),
    ("TooManyRequests", "QueryItem", "ok", False),
    ("TooManyRequests", "BatchItem", "ok", True),
    ("TooManyRequests", "ChangeFeedItem", "ok", False),
    ("TooManyRequests", "ExecuteStoredProcedure", "ok", True),
    ("Timeout", "ReadItem", "ok", False),
    ("Timeout", "CreateItem", "408", False),
    ("ServiceUnavailable", "ReadItem", "ok", False),
    ("ServiceUnavailable", "CreateItem", "ok", True),
    ("InternalServerError", "ReadItem", "ok", False),
    ("InternalServerError", "CreateItem", "500", False),
    ("RetryWith", "ReadItem", "449", False),
    ("RetryWith", "CreateItem", "449", False),
    ("PartitionIsGone", "ReadItem", "ok", False),
    ("PartitionIsGone", "CreateItem", "ok", True),
    ("PartitionIsGone", "QueryItem", "ok", False),
    ("PartitionIsGone", "ChangeFeedItem", "ok", False),
    ("PartitionIsSplitting", "ReadItem", "410/1007", False),
    ("ResponseDelay", "ReadItem", "ok", False, {"delay": "300ms"}),
    ("ConnectionReset", "ReadItem", "ok", False),
    ("ConnectionReset", "CreateItem", "conn", False),
    ("AppliedThenLost", "CreateItem", "conn", True),
    ("AppliedThenLost", "CreateItem", "409", True, {"lost": "ServiceUnavailable"}),
    ("AppliedThenLost", "CreateItem", "408", True, {"lost": "Timeout"}),
    ("AppliedThenLost", "BatchItem", "409", True, {"lost": "ServiceUnavailable"}),
    ("AppliedThenLost", "ExecuteStoredProcedure", "409", True, {"lost": "ServiceUnavailable"}),
    ("LostBeforeApply", "CreateItem", "conn", False),
    ("LostBeforeApply", "CreateItem", "ok", True, {"lost": "ServiceUnavailable"}),
]


class Faults(unittest.TestCase):
    client = None
    db = None

    @classmethod
    def setUpClass(cls):
        cls.client = CosmosClient(ENDPOINT, credential=KEY)
        cls.db = cls.client.create_database("py-faults-" + uuid.uuid4().hex[:8])

    @classmethod
    def tearDownClass(cls):
        cls.client.delete_database(cls.db)
        cls.client.__exit__(None, None, None)

    def test_the_python_sdk_under_each_fault_once(self):
        table, failures = [], []
        for n, case in enumerate(CASES):
            typ, op, want, want_applied = case[:4]
            extra = case[4] if len(case) > 4 else {}
            always = case[5] if len(case) > 5 else False
            want_hits = case[6] if len(case) > 6 else 1
            c = self.db.create_container("c-" + uuid.uuid4().hex[:8], partition_key=PartitionKey(path="/pk"))
            c.upsert_item({"id": "seed", "pk": "p"})
            c.scripts.create_stored_procedure({"id": "put", "body": PUT})
            item_id = "w%d" % n
            rule, probe = "py-%d" % n, "py-%d-pkranges" % n
            faults_admin("POST", body=[
                {"id": rule, "times": 0 if always else 1, "condition": {"container": c.id, "operations": [op]}, "result": dict(type=typ, **extra)},
                {"id": probe, "condition": {"container": c.id, "operations": ["MetadataPartitionKeyRanges"]}, "result": {"type": "ResponseDelay", "delay": "1us"}},
            ])
            start = time.monotonic()
            err = None
            try:
                if op == "ReadItem":
                    c.read_item("seed", partition_key="p")
                elif op == "CreateItem":
                    c.create_item({"id": item_id, "pk": "p"})
                elif op == "QueryItem":
                    list(c.query_items("SELECT * FROM c", partition_key="p"))
                elif op == "BatchItem":
                    c.execute_item_batch([("create", ({"id": item_id, "pk": "p"},))], partition_key="p")
                elif op == "ChangeFeedItem":
                    list(c.query_items_change_feed(start_time="Beginning"))
                elif op == "ExecuteStoredProcedure":
                    c.scripts.execute_stored_procedure("put", partition_key="p", params=[{"id": item_id, "pk": "p"}])
            except Exception as e:  # what the SDK surfaced is the point
                err = e
            elapsed = time.monotonic() - start
            got = outcome(err)
            hits = faults_admin("GET", rule)["hits"]
            refreshes = faults_admin("GET", probe)["hits"]
            faults_admin("DELETE", rule)
            faults_admin("DELETE", probe)
            applied = False
            if op not in ("ReadItem", "QueryItem", "ChangeFeedItem"):
                try:
                    c.read_item(item_id, partition_key="p")
                    applied = True
                except exceptions.CosmosResourceNotFoundError:
                    pass
            lost = extra.get("lost", "")
            table.append("%-22s %-34s %-9s attempts faulted=%d applied=%-5s pkranges reads=%d %dms" % (
                typ, op + " " + lost, got, hits, applied, refreshes, elapsed * 1000))
            if got != want:
                failures.append("%s %s %s: ended with %s (%s), want %s" % (typ, op, lost, got, str(err).splitlines()[0] if err else "", want))
            if applied != want_applied:
                failures.append("%s %s %s: applied %s, want %s" % (typ, op, lost, applied, want_applied))
            if hits != want_hits:
                failures.append("%s %s %s: the rule fired %d times, want %d" % (typ, op, lost, hits, want_hits))
            if typ == "TooManyRequests" and got == "ok" and extra.get("retryAfter") == "300ms" and elapsed < 0.29:
                failures.append("%s %s: retried after %.0f ms, before the retry-after" % (typ, op, elapsed * 1000))
        print("\nthe Python SDK under each fault, once:\n" + "\n".join(table))
        self.assertEqual(failures, [])


def drop_rule(rule):
    """Removes a rule if it is still installed."""
    try:
        faults_admin("DELETE", rule)
    except AssertionError as e:
        if " 404 " not in str(e):
            raise


def with_retries(fn, *args):
    """Runs fn again after an ambiguous failure (503, 408, a dropped
    connection), as an application that must not give up does."""
    for _ in range(100):
        try:
            return fn(*args)
        except exceptions.CosmosHttpResponseError as e:
            if e.status_code not in (408, 503):
                raise
        except (ServiceRequestError, ServiceResponseError):
            pass
    raise AssertionError("still failing after 100 tries")


class Counter(unittest.TestCase):
    """The seeds' counter (001, Question 5) when replies are lost after the
    write committed: the server applies the replace or patch, then answers
    503 in place of its reply. The SDK retries a write after a 503 once
    (one region), and the application retries what still fails."""

    N = 20

    @classmethod
    def setUpClass(cls):
        cls.client = CosmosClient(ENDPOINT, credential=KEY)
        cls.db = cls.client.create_database("py-counter-" + uuid.uuid4().hex[:8])
        cls.views = cls.db.create_container("counters-" + uuid.uuid4().hex[:8], partition_key=PartitionKey(path="/id"))

    @classmethod
    def tearDownClass(cls):
        cls.client.delete_database(cls.db)
        cls.client.__exit__(None, None, None)

    def lose(self, rule, **limits):
        faults_admin("POST", body={"id": rule, "condition": {"container": self.views.id, "operations": ["ReplaceItem", "PatchItem"]},
                                   "result": {"type": "AppliedThenLost", "lost": "ServiceUnavailable"}, **limits})
        self.addCleanup(drop_rule, rule)

    # The seeds' three counters, as written there.
    def no_etag(self, n):
        d = self.views.read_item(n, n)
        d["views"] += 1
        self.views.replace_item(n, d)

    def etag_retry(self, n):
        while True:
            d = self.views.read_item(n, n)
            d["views"] += 1
            try:
                return self.views.replace_item(n, d, etag=d["_etag"], match_condition=MatchConditions.IfNotModified)
            except exceptions.CosmosAccessConditionFailedError:
                continue  # 412: someone was faster

    def patch_incr(self, n):
        self.views.patch_item(n, n, patch_operations=[{"op": "incr", "path": "/views", "value": 1}])

    # The fix: each increment carries an id, written in the same write.
    def etag_once(self, n, op_id):
        while True:
            d = self.views.read_item(n, n)
            if op_id in d["ops"]:
                return  # this increment landed already: its reply was lost
            d["views"] += 1
            d["ops"] = (d["ops"] + [op_id])[-100:]
            try:
                return self.views.replace_item(n, d, etag=d["_etag"], match_condition=MatchConditions.IfNotModified)
            except exceptions.CosmosAccessConditionFailedError:
                continue  # 412: someone was faster, or our own write landed

    def patch_once(self, n, op_id):
        try:
            self.views.patch_item(n, n, patch_operations=[{"op": "incr", "path": "/views", "value": 1}, {"op": "add", "path": "/ops/-", "value": op_id}],
                                  filter_predicate="FROM c WHERE NOT ARRAY_CONTAINS(c.ops, '%s')" % op_id)
        except exceptions.CosmosAccessConditionFailedError:
            pass  # 412: the filter found op_id, so this increment landed already

    def count(self, name, fn, writers=1, per_op_id=False):
        self.views.upsert_item({"id": name, "views": 0, "ops": []})

        def one(i):
            if per_op_id:
                with_retries(fn, name, "%s-%d" % (name, i))
            else:
                with_retries(fn, name)
        if writers == 1:
            for i in range(self.N):
                one(i)
        else:
            from concurrent.futures import ThreadPoolExecutor
            with ThreadPoolExecutor(max_workers=writers) as pool:
                list(pool.map(one, range(self.N)))
        return self.views.read_item(name, name)["views"]

    def test_the_seeds_etag_and_patch_counters_double_count_when_a_committed_write_loses_its_reply(self):
        # Ten replies lost in a row: the SDK's retry of each lost write is
        # lost too, and the application tries again, five times.
        got = {}
        for name, fn in (("no_etag", self.no_etag), ("etag_retry", self.etag_retry), ("patch_incr", self.patch_incr)):
            self.lose("lose-" + name, times=10)
            got[name] = self.count(name, fn)
            drop_rule("lose-" + name)
        print("\n%d increments, 10 replies lost after commit: %s" % (self.N, got))
        # Each try of the read-modify-write that landed counts once more:
        # five tries landed (the SDK's retry rewrote the same value).
        self.assertEqual(got["no_etag"], self.N + 5)
        # The SDK retries the replace with the same ETag: 412, lost too;
        # each of the application's five tries read the item again.
        self.assertEqual(got["etag_retry"], self.N + 5)
        # Every lost patch was applied: ten more.
        self.assertEqual(got["patch_incr"], self.N + 10)

    def test_an_increment_that_carries_its_id_counts_once_whatever_is_lost(self):
        got = {}
        for name, fn in (("etag_once", self.etag_once), ("patch_once", self.patch_once)):
            self.lose("lose-" + name, times=10)
            got[name] = self.count(name, fn, per_op_id=True)
            drop_rule("lose-" + name)
            # And with eight writers racing, a third of all replies lost.
            self.lose("lose-race-" + name, probability=0.3)
            got[name + " (8 writers)"] = self.count(name + "-race", fn, writers=8, per_op_id=True)
            drop_rule("lose-race-" + name)
        print("\n%d increments: %s" % (self.N, got))
        for name, v in got.items():
            self.assertEqual(v, self.N, name)
