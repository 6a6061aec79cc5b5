// Spatial queries and indexes through the JavaScript SDK: the behaviours of
// the SDK's own spatial and spatial bounding box suites (a legacy Spatial
// index narrows ST_DISTANCE; Geometry containers need a boundingBox,
// Geography ones refuse it) and the spatial functions' documented answers.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { expectCosmosError, newClient, uniqueId } from "./orrery.mjs";

const client = newClient();

/** Asserts that got is within a millionth of want. */
function near(got, want, what) {
  assert.ok(Math.abs(got - want) <= 1e-6 * Math.abs(want), `${what}: ${got}, want ${want}`);
}

describe("spatial", () => {
  let database;

  before(async () => {
    ({ database } = await client.databases.create({ id: uniqueId("jsspatial") }));
  });

  after(async () => {
    await database.delete();
  });

  for (const upsert of [false, true]) {
    test(`a Spatial index of an included path finds the point within 20 km${upsert ? " (items upserted)" : ""}`, async () => {
      const { container } = await database.containers.create({
        id: uniqueId("legacy"),
        indexingPolicy: {
          includedPaths: [{ path: '/"Location"/?', indexes: [{ kind: "Spatial", dataType: "Point" }] }, { path: "/" }],
        },
      });
      const write = (item) => (upsert ? container.items.upsert(item) : container.items.create(item));
      await write({ id: "location1", Location: { type: "Point", coordinates: [20.0, 20.0] } });
      // Latitude 100 is not a valid position: never within any distance.
      await write({ id: "location2", Location: { type: "Point", coordinates: [100.0, 100.0] } });
      const { resources } = await container.items
        .query("SELECT * FROM root WHERE (ST_DISTANCE(root.Location, {type: 'Point', coordinates: [20.1, 20]}) < 20000) ")
        .fetchAll();
      assert.deepEqual(resources.map((r) => r.id), ["location1"]);
    });
  }

  test("a Geography container's spatial index takes no boundingBox, a Geometry container's needs one", async () => {
    const created = await database.containers.create({
      id: uniqueId("geo"),
      partitionKey: { paths: ["/id"] },
      indexingPolicy: { spatialIndexes: [{ path: "/location/?", types: ["Point"] }] },
      geospatialConfig: { type: "Geography" },
    });
    const geo = created.resource.indexingPolicy.spatialIndexes;
    assert.equal(geo.length, 1);
    assert.equal(geo[0].path, "/location/?");
    assert.equal(geo[0].boundingBox, undefined);

    const box = { xmin: 0, ymin: 0, xmax: 100, ymax: 100 };
    const geom = await database.containers.create({
      id: uniqueId("geom"),
      partitionKey: { paths: ["/id"] },
      indexingPolicy: { spatialIndexes: [{ path: "/location/?", types: ["Point", "Polygon"], boundingBox: box }] },
      geospatialConfig: { type: "Geometry" },
    });
    assert.deepEqual(geom.resource.indexingPolicy.spatialIndexes[0].boundingBox, box);
    assert.equal(geom.resource.geospatialConfig.type, "Geometry");

    for (const [type, boundingBox] of [
      ["Geometry", undefined],
      ["Geography", { xmin: -180, ymin: -90, xmax: 180, ymax: 90 }],
    ]) {
      const err = await expectCosmosError(() =>
        database.containers.create({
          id: uniqueId("refused"),
          partitionKey: { paths: ["/id"] },
          indexingPolicy: { spatialIndexes: [{ path: "/location/?", types: ["Point"], boundingBox }] },
          geospatialConfig: { type },
        }),
      );
      assert.equal(err.code, 400, type);
      assert.ok(err.message.includes("boundingBox") && err.message.includes(type), err.message);
    }
  });

  test("a Geometry container's functions compute on the plane, in its coordinates' units", async () => {
    const { container } = await database.containers.create({
      id: uniqueId("plane"),
      partitionKey: { paths: ["/id"] },
      indexingPolicy: {
        spatialIndexes: [{ path: "/at/?", types: ["Point", "Polygon"], boundingBox: { xmin: 0, ymin: 0, xmax: 1000, ymax: 1000 } }],
      },
      geospatialConfig: { type: "Geometry" },
    });
    await container.items.create({ id: "a", at: { type: "Point", coordinates: [300, 400] } });
    await container.items.create({ id: "b", at: { type: "Point", coordinates: [600, 800] } });
    const { resources } = await container.items
      .query(
        "SELECT c.id, ST_DISTANCE(c.at, {'type': 'Point', 'coordinates': [0, 0]}) AS d, " +
          "ST_AREA({'type': 'Polygon', 'coordinates': [[[0, 0], [10, 0], [10, 10], [0, 10], [0, 0]]]}) AS area " +
          "FROM c WHERE ST_WITHIN(c.at, {'type': 'Polygon', 'coordinates': [[[0, 0], [500, 0], [500, 500], [0, 500], [0, 0]]]})",
      )
      .fetchAll();
    assert.deepEqual(resources, [{ id: "a", d: 500, area: 100 }]);
  });

  describe("functions", () => {
    let container;

    before(async () => {
      ({ container } = await database.containers.create({
        id: "offices",
        partitionKey: { paths: ["/category"] },
        indexingPolicy: { spatialIndexes: [{ path: "/location/?", types: ["Point", "Polygon"] }] },
      }));
      await container.items.create({
        id: "hq",
        name: "Headquarters",
        category: "business-offices",
        location: { type: "Point", coordinates: [-122.12826822304672, 47.63980239335718] },
      });
      await container.items.create({
        id: "rd",
        name: "Research and development",
        category: "business-offices",
        location: { type: "Point", coordinates: [-96.84368664765994, 46.81297794314663] },
      });
      await container.items.create({
        id: "lake",
        name: "Lake office",
        category: "remote",
        location: { type: "Point", coordinates: [31.9, -4.8] },
      });
    });

    test("ST_DISTANCE gives the documented kilometres, across partitions", async () => {
      const { resources } = await container.items
        .query(`SELECT o.name, ST_DISTANCE(o.location, {"type": "Point", "coordinates": [-122.11758113953535, 47.66901087006131]}) / 1000 AS distanceKilometers
                FROM offices o WHERE o.category = "business-offices"`)
        .fetchAll();
      const byName = Object.fromEntries(resources.map((r) => [r.name, r.distanceKilometers]));
      near(byName["Headquarters"], 3.345269817267368, "Headquarters");
      near(byName["Research and development"], 1907.438421299902, "Research and development");
    });

    test("ST_WITHIN finds the item in the documented polygon, and the index serves it", async () => {
      const response = await container.items
        .query(
          {
            query: "SELECT VALUE o.id FROM o WHERE ST_WITHIN(o.location, @area)",
            parameters: [
              { name: "@area", value: { type: "Polygon", coordinates: [[[31.8, -5], [32, -5], [32, -4.7], [31.8, -4.7], [31.8, -5]]] } },
            ],
          },
          { partitionKey: "remote", populateIndexMetrics: true },
        )
        .fetchAll();
      assert.deepEqual(response.resources, ["lake"]);
      const metrics = JSON.parse(response.indexMetrics);
      const used = metrics.UtilizedSingleIndexes.map((u) => u.IndexSpec);
      assert.ok(used.includes("/location/?"), JSON.stringify(metrics));
    });

    test("ST_INTERSECTS, ST_AREA, ST_ISVALID and ST_ISVALIDDETAILED give the documented answers", async () => {
      const { resources } = await container.items
        .query(
          `SELECT VALUE {
             area: ST_AREA({"type": "Polygon", "coordinates": [[[31.8, -5], [32, -5], [32, -4.7], [31.8, -4.7], [31.8, -5]]]}),
             valid: ST_ISVALID({"type": "Point", "coordinates": [-84.38876194345323, 33.75682784306348]}),
             invalid: ST_ISVALIDDETAILED({"type": "Point", "coordinates": [133.75682784306348, -184.38876194345323]}),
             open: ST_ISVALIDDETAILED({"type": "Polygon", "coordinates": [[[31.8, -5], [31.8, -4.7], [32, -4.7], [32, -5]]]}),
             crosses: ST_INTERSECTS({"type": "LineString", "coordinates": [[31.7, -4.8], [32.1, -4.8]]}, {"type": "Polygon", "coordinates": [[[31.8, -5], [32, -5], [32, -4.7], [31.8, -4.7], [31.8, -5]]]})
           } FROM o WHERE o.id = "lake"`,
          { partitionKey: "remote" },
        )
        .fetchAll();
      const r = resources[0];
      near(r.area, 735970283.0522614, "ST_AREA");
      assert.equal(r.valid, true);
      assert.deepEqual(r.invalid, { valid: false, reason: "Latitude values must be between -90 and 90 degrees." });
      assert.equal(r.open.valid, false);
      assert.match(r.open.reason, /start and end points of the ring number 1 are not the same/);
      assert.equal(r.crosses, true);
    });
  });
});
