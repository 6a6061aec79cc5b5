"""Orrery through the Python SDK, azure-cosmos 3.1 (Debian's python3-azure-cosmos).

Run by compat/python_test.go against an in-process server named by
ORRERY_ENDPOINT and ORRERY_KEY. Each step prints one line; the Go test
compares the output with what Cosmos DB answers.
"""
import os

from azure.cosmos import cosmos_client, errors

client = cosmos_client.CosmosClient(os.environ["ORRERY_ENDPOINT"], {"masterKey": os.environ["ORRERY_KEY"]})


def status(fn):
    """Runs fn and returns the HTTP status it failed with, or 'ok'."""
    try:
        fn()
    except errors.HTTPFailure as e:
        return e.status_code
    return "ok"


db = client.CreateDatabase({"id": "pydb"})
print("database", db["id"], "conflict", status(lambda: client.CreateDatabase({"id": "pydb"})))
# The database's _self is a link by RID, which this SDK signs by the RID alone.
coll = client.CreateContainer(db["_self"], {"id": "c", "partitionKey": {"paths": ["/pk"], "kind": "Hash"}, "defaultTtl": -1})
print("container", coll["id"], coll["partitionKey"]["paths"], coll["defaultTtl"])
link = "dbs/pydb/colls/c"

item = client.CreateItem(link, {"id": "a", "pk": "p", "n": 1})
print("created", item["id"], item["n"], "again", status(lambda: client.CreateItem(link, {"id": "a", "pk": "p"})))
client.CreateItem(link, {"id": "a", "pk": "q", "n": 10})
print("same id, other partition", client.ReadItem(link + "/docs/a", {"partitionKey": "q"})["n"])

stale = client.ReadItem(link + "/docs/a", {"partitionKey": "p"})
fresh = dict(stale, n=2)
client.ReplaceItem(link + "/docs/a", fresh, {"partitionKey": "p", "accessCondition": {"type": "IfMatch", "condition": stale["_etag"]}})
print("stale etag", status(lambda: client.ReplaceItem(link + "/docs/a", dict(stale, n=3),
                                                   {"partitionKey": "p", "accessCondition": {"type": "IfMatch", "condition": stale["_etag"]}})))
print("by _self", client.ReadItem(stale["_self"], {"partitionKey": "p"})["n"])

client.UpsertItem(link, {"id": "b", "pk": "p", "n": 5})
query = {"query": "SELECT VALUE c.n FROM c WHERE c.n >= @min ORDER BY c.n", "parameters": [{"name": "@min", "value": 2}]}
print("query", list(client.QueryItems(link, query, {"partitionKey": "p"})))

feed = list(client.QueryItemsChangeFeed(link, {"startFromBeginning": True, "partitionKeyRangeId": "0"}))
print("change feed", sorted((d["id"], d["pk"]) for d in feed))

sproc = client.CreateStoredProcedure(link, {"id": "double", "body": """
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
print("sproc", client.ExecuteStoredProcedure(sproc["_self"], ["b"], {"partitionKey": "p"}))
print("sproc error", status(lambda: client.ExecuteStoredProcedure(sproc["_self"], ["missing"], {"partitionKey": "p"})))

client.DeleteItem(link + "/docs/a", {"partitionKey": "p"})
print("deleted", status(lambda: client.ReadItem(link + "/docs/a", {"partitionKey": "p"})))
client.DeleteDatabase("dbs/pydb")
print("database gone", status(lambda: client.ReadDatabase("dbs/pydb")))
