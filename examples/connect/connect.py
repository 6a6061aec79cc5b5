import json
import os

from azure.cosmos import CosmosClient, PartitionKey
from azure.cosmos.documents import SSLConfiguration

# Trust Orrery's certificate (orrery cert > orrery.pem), whatever the host's
# name. (The SDK's connection_verify cannot name a file: it only turns
# checks on or off, and they are off for localhost.)
ssl = SSLConfiguration()
ssl.SSLCaCerts = os.environ.get("COSMOS_CA", "orrery.pem")

client = CosmosClient(
    os.environ.get("COSMOS_ENDPOINT", "https://localhost:8081/"),
    # The emulator's well-known key, which Orrery uses unless started with --key.
    credential="C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==",
    ssl_config=ssl,
)
database = client.create_database_if_not_exists("shop")
orders = database.create_container_if_not_exists("orders", partition_key=PartitionKey(path="/customer"))
orders.upsert_item({"id": "1", "customer": "alice", "total": 12.5})
item = orders.read_item("1", partition_key="alice")
print(json.dumps({"id": item["id"], "customer": item["customer"], "total": item["total"]}))
