import { CosmosClient } from "@azure/cosmos";

const client = new CosmosClient({
  endpoint: process.env.COSMOS_ENDPOINT ?? "https://localhost:8081/",
  // The emulator's well-known key, which Orrery uses unless started with --key.
  key: "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==",
});

const { database } = await client.databases.createIfNotExists({ id: "shop" });
const { container } = await database.containers.createIfNotExists({
  id: "orders",
  partitionKey: { paths: ["/customer"] },
});
await container.items.upsert({ id: "1", customer: "alice", total: 12.5 });
const { resource } = await container.item("1", "alice").read();
console.log(JSON.stringify({ id: resource.id, customer: resource.customer, total: resource.total }));
