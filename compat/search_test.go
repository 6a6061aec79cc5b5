package compat

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/orrerytest"
)

// searchContainerProps is a container with two embeddings (cosine and dot
// product) under flat indexes and two English full-text paths, as the Go
// SDK's own vector and full-text tests create them.
func searchContainerProps(id string) azcosmos.ContainerProperties {
	return azcosmos.ContainerProperties{
		ID:                     id,
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}},
		VectorEmbeddingPolicy: &azcosmos.VectorEmbeddingPolicy{VectorEmbeddings: []azcosmos.VectorEmbedding{
			{Path: "/embedding", DataType: azcosmos.VectorDataTypeFloat32, DistanceFunction: azcosmos.VectorDistanceFunctionCosine, Dimensions: 3},
			{Path: "/textEmbedding", DataType: azcosmos.VectorDataTypeFloat32, DistanceFunction: azcosmos.VectorDistanceFunctionDotProduct, Dimensions: 3},
		}},
		FullTextPolicy: &azcosmos.FullTextPolicy{DefaultLanguage: "en-US", FullTextPaths: []azcosmos.FullTextPath{
			{Path: "/title", Language: "en-US"}, {Path: "/description", Language: "en-US"},
		}},
		IndexingPolicy: &azcosmos.IndexingPolicy{
			Automatic:     true,
			IndexingMode:  azcosmos.IndexingModeConsistent,
			IncludedPaths: []azcosmos.IncludedPath{{Path: "/*"}},
			ExcludedPaths: []azcosmos.ExcludedPath{{Path: "/\"_etag\"/?"}, {Path: "/embedding/*"}, {Path: "/textEmbedding/*"}},
			VectorIndexes: []azcosmos.VectorIndex{
				{Path: "/embedding", Type: azcosmos.VectorIndexTypeFlat},
				{Path: "/textEmbedding", Type: azcosmos.VectorIndexTypeQuantizedFlat},
			},
			FullTextIndexes: []azcosmos.FullTextIndex{{Path: "/title"}, {Path: "/description"}},
		},
	}
}

func TestSearchPoliciesReadBackAsCreated(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	if _, err := s.Client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil {
		t.Fatal(err)
	}
	db, _ := s.Client.NewDatabase("db")
	want := searchContainerProps("search")
	if _, err := db.CreateContainer(ctx, want, nil); err != nil {
		t.Fatal(err)
	}
	c, _ := db.NewContainer("search")
	resp, err := c.Read(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := resp.ContainerProperties
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	if js(got.VectorEmbeddingPolicy) != js(want.VectorEmbeddingPolicy) {
		t.Errorf("vectorEmbeddingPolicy: %s, want %s", js(got.VectorEmbeddingPolicy), js(want.VectorEmbeddingPolicy))
	}
	if js(got.FullTextPolicy) != js(want.FullTextPolicy) {
		t.Errorf("fullTextPolicy: %s, want %s", js(got.FullTextPolicy), js(want.FullTextPolicy))
	}
	if js(got.IndexingPolicy.VectorIndexes) != js(want.IndexingPolicy.VectorIndexes) {
		t.Errorf("vectorIndexes: %s, want %s", js(got.IndexingPolicy.VectorIndexes), js(want.IndexingPolicy.VectorIndexes))
	}
	if js(got.IndexingPolicy.FullTextIndexes) != js(want.IndexingPolicy.FullTextIndexes) {
		t.Errorf("fullTextIndexes: %s, want %s", js(got.IndexingPolicy.FullTextIndexes), js(want.IndexingPolicy.FullTextIndexes))
	}

	// The full-text policy may be replaced; the embeddings and vector
	// indexes may not change, though new ones may be added.
	clone := func(p *azcosmos.ContainerProperties) azcosmos.ContainerProperties {
		var out azcosmos.ContainerProperties
		b, _ := json.Marshal(p)
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	next := clone(got)
	next.FullTextPolicy = &azcosmos.FullTextPolicy{DefaultLanguage: "fr-FR", FullTextPaths: []azcosmos.FullTextPath{{Path: "/title", Language: "fr-FR"}}}
	next.IndexingPolicy.FullTextIndexes = []azcosmos.FullTextIndex{{Path: "/title"}}
	next.VectorEmbeddingPolicy.VectorEmbeddings = append(next.VectorEmbeddingPolicy.VectorEmbeddings,
		azcosmos.VectorEmbedding{Path: "/other", DataType: azcosmos.VectorDataTypeInt8, DistanceFunction: azcosmos.VectorDistanceFunctionEuclidean, Dimensions: 8})
	if _, err := c.Replace(ctx, next, nil); err != nil {
		t.Fatalf("replacing the full-text policy and adding an embedding: %v", err)
	}
	changed := clone(&next)
	changed.VectorEmbeddingPolicy.VectorEmbeddings[0].Dimensions = 4
	_, err = c.Replace(ctx, changed, nil)
	assertBadRequest(t, err, "Paths in existing embedding policy cannot be modified in Collection Replace")
	changed = clone(&next)
	changed.IndexingPolicy.VectorIndexes[0].Type = azcosmos.VectorIndexTypeQuantizedFlat
	_, err = c.Replace(ctx, changed, nil)
	assertBadRequest(t, err, "Paths in existing vector indexing policy cannot be modified in Collection Replace")

	// A replace by a client that does not send the policies keeps them.
	bare := clone(&next)
	bare.VectorEmbeddingPolicy, bare.FullTextPolicy = nil, nil
	bare.IndexingPolicy.VectorIndexes, bare.IndexingPolicy.FullTextIndexes = nil, nil
	ttl := int32(60)
	bare.DefaultTimeToLive = &ttl
	kept, err := c.Replace(ctx, bare, nil)
	if err != nil {
		t.Fatalf("a replace without the policies: %v", err)
	}
	if p := kept.ContainerProperties; js(p.VectorEmbeddingPolicy) != js(next.VectorEmbeddingPolicy) || js(p.FullTextPolicy) != js(next.FullTextPolicy) ||
		len(p.IndexingPolicy.VectorIndexes) != 2 || len(p.IndexingPolicy.FullTextIndexes) != 1 {
		t.Fatalf("a replace without the policies dropped them: %s", js(p))
	}
}

func assertBadRequest(t *testing.T, err error, message string) {
	t.Helper()
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusBadRequest {
		t.Fatalf("got %v, want a 400 saying %q", err, message)
	}
	if !strings.Contains(err.Error(), message) {
		t.Fatalf("got %v, want the message %q", err, message)
	}
}

func TestSearchPoliciesAreRefusedWithTheServicesMessages(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	if _, err := s.Client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, body, message string }{
		{"dimensions over the limit",
			`"vectorEmbeddingPolicy":{"vectorEmbeddings":[{"path":"/v","dataType":"float32","distanceFunction":"cosine","dimensions":5000}]}`,
			"Dimensions:5000 which is more than the maximum supported value of 4096"},
		{"an unknown distance function",
			`"vectorEmbeddingPolicy":{"vectorEmbeddings":[{"path":"/v","dataType":"float32","distanceFunction":"manhattan","dimensions":3}]}`,
			"invalid DistanceFunction:manhattan"},
		{"a flat index over 505 dimensions",
			`"vectorEmbeddingPolicy":{"vectorEmbeddings":[{"path":"/v","dataType":"float32","distanceFunction":"cosine","dimensions":768}]},
			 "indexingPolicy":{"excludedPaths":[{"path":"/v/*"}],"vectorIndexes":[{"path":"/v","type":"flat"}]}`,
			"flat supports at most 505 dimensions"},
		{"a vector index without an embedding",
			`"indexingPolicy":{"vectorIndexes":[{"path":"/v","type":"diskANN"}]}`,
			"path::/v not matching in Embedding's path"},
		{"a search list size out of range",
			`"vectorEmbeddingPolicy":{"vectorEmbeddings":[{"path":"/v","dataType":"float32","distanceFunction":"cosine","dimensions":3}]},
			 "indexingPolicy":{"vectorIndexes":[{"path":"/v","type":"diskANN","indexingSearchListSize":10}]}`,
			"IndexingSearchListSize value :: 10 is out of range"},
		{"a vector path in the range index",
			`"vectorEmbeddingPolicy":{"vectorEmbeddings":[{"path":"/v","dataType":"float32","distanceFunction":"cosine","dimensions":3}]},
			 "indexingPolicy":{"includedPaths":[{"path":"/v/*"}],"vectorIndexes":[{"path":"/v","type":"diskANN"}]}`,
			"must be excluded from the range index"},
		{"an unsupported language",
			`"fullTextPolicy":{"defaultLanguage":"xx-XX","fullTextPaths":[]}`,
			"unsupported language xx-XX"},
		{"a full-text index outside the policy",
			`"fullTextPolicy":{"defaultLanguage":"en-US","fullTextPaths":[{"path":"/a","language":"en-US"}]},
			 "indexingPolicy":{"fullTextIndexes":[{"path":"/b"}]}`,
			"The path of the Full Text Index /b does not match the path specified in the Full Text Policy"},
	}
	for i, tc := range cases {
		body := []byte(`{"id":"c` + string(rune('a'+i)) + `","partitionKey":{"paths":["/pk"],"kind":"Hash","version":2},` + tc.body + `}`)
		r := rawRequest(t, s, "POST", "/dbs/db/colls", "colls", "dbs/db", body, nil)
		if r.status != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", tc.name, r.status, r.body)
			continue
		}
		var e struct{ Code, Message string }
		if err := json.Unmarshal(r.body, &e); err != nil || e.Code != "BadRequest" || !strings.Contains(e.Message, tc.message) {
			t.Errorf("%s: %s, want code BadRequest and a message with %q", tc.name, r.body, tc.message)
		}
	}
	db, _ := s.Client.NewDatabase("db")
	pager := db.NewQueryContainersPager("SELECT * FROM c", nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Containers) != 0 {
			t.Fatalf("a refused container was created: %s", page.Containers[0].ID)
		}
	}
}

// searchFixture creates database db and container "search"
// (searchContainerProps) and returns it.
func searchFixture(t *testing.T, s *orrerytest.Server) *azcosmos.ContainerClient {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil {
		t.Fatal(err)
	}
	db, _ := s.Client.NewDatabase("db")
	if _, err := db.CreateContainer(ctx, searchContainerProps("search"), nil); err != nil {
		t.Fatal(err)
	}
	c, _ := db.NewContainer("search")
	return c
}

func createItems(t *testing.T, c *azcosmos.ContainerClient, items ...string) {
	t.Helper()
	for _, it := range items {
		var m struct{ PK string }
		if err := json.Unmarshal([]byte(it), &m); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateItem(context.Background(), azcosmos.NewPartitionKeyString(m.PK), []byte(it), nil); err != nil {
			t.Fatalf("%s: %v", it, err)
		}
	}
}

// queryPK runs q in one logical partition through the SDK and returns
// every result.
func queryPK(t *testing.T, c *azcosmos.ContainerClient, pk, q string, params ...azcosmos.QueryParameter) []string {
	t.Helper()
	var out []string
	pager := c.NewQueryItemsPager(q, azcosmos.NewPartitionKeyString(pk), &azcosmos.QueryOptions{QueryParameters: params})
	for pager.More() {
		page, err := pager.NextPage(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		for _, it := range page.Items {
			out = append(out, string(it))
		}
	}
	return out
}

func TestGoSDKVectorSearchRanksByThePolicysDistanceFunction(t *testing.T) {
	s := orrerytest.Start(t)
	c := searchFixture(t, s)
	createItems(t, c,
		`{"id":"a","pk":"p","embedding":[1,0,0],"textEmbedding":[1,0,0]}`,
		`{"id":"b","pk":"p","embedding":[0.6,0.8,0],"textEmbedding":[3,0,0]}`,
		`{"id":"c","pk":"p","embedding":[-1,0,0],"textEmbedding":[2,1,0]}`,
		`{"id":"d","pk":"p","embedding":[0,1,0],"textEmbedding":[0,0,1]}`,
		`{"id":"far","pk":"q","embedding":[1,0,0],"textEmbedding":[9,9,9]}`)
	// /embedding is cosine: the most similar first, scores the cosine.
	got := queryPK(t, c, "p", `SELECT TOP 3 c.id, VectorDistance(c.embedding, [2,0,0]) AS score FROM c ORDER BY VectorDistance(c.embedding, [2,0,0])`)
	if want := `{"id":"a","score":1},{"id":"b","score":0.6},{"id":"d","score":0}`; strings.Join(got, ",") != want {
		t.Errorf("cosine: %v, want %s", got, want)
	}
	// /textEmbedding is dot product: the largest first, scores unnormalized.
	got = queryPK(t, c, "p", `SELECT TOP 2 c.id, VectorDistance(c.textEmbedding, @v) AS score FROM c ORDER BY VectorDistance(c.textEmbedding, @v)`,
		azcosmos.QueryParameter{Name: "@v", Value: []float64{2, 0, 0}})
	if want := `{"id":"b","score":6},{"id":"c","score":4}`; strings.Join(got, ",") != want {
		t.Errorf("dot product: %v, want %s", got, want)
	}
	// The fourth argument overrides the policy: Euclidean, closest first.
	got = queryPK(t, c, "p", `SELECT TOP 2 VALUE c.id FROM c ORDER BY VectorDistance(c.textEmbedding, [2,1,0], false, {'distanceFunction':'euclidean'})`)
	if want := `"c","a"`; strings.Join(got, ",") != want {
		t.Errorf("euclidean: %v, want %s", got, want)
	}
	// Filters apply with the ranking, and the partition key scopes it.
	got = queryPK(t, c, "p", `SELECT TOP 10 VALUE c.id FROM c WHERE c.id != "a" AND VectorDistance(c.embedding, [1,0,0]) > -0.5 ORDER BY VectorDistance(c.embedding, [1,0,0])`)
	if want := `"b","d"`; strings.Join(got, ",") != want {
		t.Errorf("filtered: %v, want %s", got, want)
	}
}

func TestGoSDKFullTextSearchAnalyzesAndRanksOverTheContainer(t *testing.T) {
	s := orrerytest.Start(t)
	c := searchFixture(t, s)
	createItems(t, c,
		`{"id":"1","pk":"test","title":"Azure Cosmos DB Full Text Search","description":"Learn about the powerful full-text search capabilities in Azure Cosmos DB"}`,
		`{"id":"2","pk":"test","title":"Not related","description":"An unrelated item that should not match the query"}`,
		`{"id":"3","pk":"test","title":"Running shoes","description":"The runners ran in apples"}`)
	got := queryPK(t, c, "test", `SELECT VALUE c.id FROM c WHERE FullTextContains(c.title, "search") OR FullTextContains(c.description, "search")`)
	if strings.Join(got, ",") != `"1"` {
		t.Errorf("FullTextContains: %v, want [\"1\"]", got)
	}
	// English stemming: "run" finds "Running", "apple" finds "apples";
	// stop words are not terms.
	got = queryPK(t, c, "test", `SELECT VALUE c.id FROM c WHERE FullTextContainsAll(c.title, "run", "shoe") AND FullTextContainsAny(c.description, "apple", "zebra")`)
	if strings.Join(got, ",") != `"3"` {
		t.Errorf("stemmed FullTextContainsAll/Any: %v, want [\"3\"]", got)
	}
	if got = queryPK(t, c, "test", `SELECT VALUE c.id FROM c WHERE FullTextContains(c.description, "the")`); len(got) != 0 {
		t.Errorf("a stop word matched: %v", got)
	}

	// BM25's statistics are the container's: in partition "p" alone
	// "alpha" and "beta" are equally rare and the first-created ties
	// first; across the container "alpha" is common, so the item with
	// "beta" ranks first.
	createItems(t, c,
		`{"id":"A","pk":"p","title":"alpha gamma"}`,
		`{"id":"B","pk":"p","title":"beta gamma"}`)
	for i := 0; i < 6; i++ {
		createItems(t, c, `{"id":"x`+string(rune('0'+i))+`","pk":"other","title":"alpha delta"}`)
	}
	got = queryPK(t, c, "p", `SELECT TOP 2 VALUE c.id FROM c ORDER BY RANK FullTextScore(c.title, "alpha", "beta")`)
	if strings.Join(got, ",") != `"B","A"` {
		t.Errorf("ORDER BY RANK FullTextScore: %v, want B before A", got)
	}
	// RRF fuses the full-text rank with a vector rank.
	createItems(t, c,
		`{"id":"v1","pk":"h","title":"alpha","embedding":[0,1,0]}`,
		`{"id":"v2","pk":"h","title":"beta","embedding":[1,0,0]}`,
		`{"id":"v3","pk":"h","title":"gamma","embedding":[0.9,0.1,0]}`)
	got = queryPK(t, c, "h", `SELECT TOP 3 VALUE c.id FROM c ORDER BY RANK RRF(FullTextScore(c.title, "beta"), VectorDistance(c.embedding, [1,0,0]))`)
	if len(got) != 3 || got[0] != `"v2"` {
		t.Errorf("RRF: %v, want v2 first (first in both ranks)", got)
	}
}

func TestGoSDKIndexMetricsNameTheSearchIndexesAPathLacks(t *testing.T) {
	s := orrerytest.Start(t)
	c := searchFixture(t, s)
	createItems(t, c, `{"id":"a","pk":"p","embedding":[1,0,0],"other":[1,0],"title":"red fox","body":"red"}`)
	metrics := func(q string) (string, float64) {
		t.Helper()
		pager := c.NewQueryItemsPager(q, azcosmos.NewPartitionKeyString("p"), &azcosmos.QueryOptions{PopulateIndexMetrics: true})
		page, err := pager.NextPage(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if page.IndexMetrics == nil {
			t.Fatalf("%s: no index metrics", q)
		}
		raw, err := base64.StdEncoding.DecodeString(*page.IndexMetrics)
		if err != nil {
			t.Fatal(err)
		}
		return string(raw), float64(page.RequestCharge)
	}
	m, charge := metrics(`SELECT TOP 1 c.id FROM c ORDER BY VectorDistance(c.other, [1,0])`)
	if !strings.Contains(m, `"PotentialSingleIndexes":[{"FilterExpression":"VectorDistance(ROOT.other)","IndexSpec":"/other/*"`) {
		t.Errorf("a vector path without a vector index is not named potential: %s", m)
	}
	if charge < 2 {
		t.Errorf("vector search charged %v RU", charge)
	}
	m, _ = metrics(`SELECT TOP 1 c.id FROM c WHERE FullTextContains(c.body, "red") ORDER BY RANK FullTextScore(c.title, "red")`)
	if !strings.Contains(m, `"PotentialSingleIndexes":[{"FilterExpression":"FullTextContains(ROOT.body)","IndexSpec":"/body/*"`) {
		t.Errorf("a full-text path without an index is not named potential: %s", m)
	}
	if potential := m[strings.Index(m, `"PotentialSingleIndexes"`):]; strings.Contains(potential, "ROOT.title") {
		t.Errorf("an indexed full-text path is named potential: %s", m)
	}
	// On PostgreSQL (a store several gateways share) no search index is
	// kept: the ranking is exact.
	if onPG := os.Getenv(orrerytest.StorageEnv) == "postgres"; !onPG && !strings.Contains(m, `"IndexSpec":"/title (full-text index)"`) {
		t.Errorf("the full-text index that ranked the items is not named utilized: %s", m)
	}
}

func TestGoSDKFullTextAnalyzesEachPathInItsLanguage(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	if _, err := s.Client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil {
		t.Fatal(err)
	}
	db, _ := s.Client.NewDatabase("db")
	props := azcosmos.ContainerProperties{
		ID:                     "langs",
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}},
		FullTextPolicy: &azcosmos.FullTextPolicy{DefaultLanguage: "en-US", FullTextPaths: []azcosmos.FullTextPath{
			{Path: "/fr", Language: "fr-FR"}, {Path: "/en"},
		}},
	}
	if _, err := db.CreateContainer(ctx, props, nil); err != nil {
		t.Fatal(err)
	}
	c, _ := db.NewContainer("langs")
	createItems(t, c, `{"id":"1","pk":"p","fr":"les maisons du village","en":"les maisons du village"}`)
	for _, tc := range []struct {
		where string
		match bool
	}{
		{`FullTextContains(c.fr, "maison")`, true}, // French stemming
		{`FullTextContains(c.fr, "les")`, false},   // a French stop word
		{`FullTextContains(c.en, "les")`, true},    // not an English one
	} {
		got := queryPK(t, c, "p", `SELECT VALUE c.id FROM c WHERE `+tc.where)
		if (len(got) == 1) != tc.match {
			t.Errorf("%s: %v, want a match %v", tc.where, got, tc.match)
		}
	}
}

// A path's language given as the Windows locale id "1033", as the JS SDK's
// suite creates it and the service takes it, is en-US: the container is
// created, reads back with the language as given, and the path is
// analyzed in English.
func TestGoSDKFullTextPathLanguageMayBeAnLCID(t *testing.T) {
	s := orrerytest.Start(t)
	ctx := context.Background()
	if _, err := s.Client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil {
		t.Fatal(err)
	}
	db, _ := s.Client.NewDatabase("db")
	want := &azcosmos.FullTextPolicy{DefaultLanguage: "en-US", FullTextPaths: []azcosmos.FullTextPath{
		{Path: "/text1", Language: "1033"}, {Path: "/text2", Language: "en-US"},
	}}
	props := azcosmos.ContainerProperties{
		ID:                     "lcid",
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}},
		FullTextPolicy:         want,
		IndexingPolicy: &azcosmos.IndexingPolicy{
			Automatic: true, IndexingMode: azcosmos.IndexingModeConsistent,
			IncludedPaths:   []azcosmos.IncludedPath{{Path: "/*"}},
			FullTextIndexes: []azcosmos.FullTextIndex{{Path: "/text1"}, {Path: "/text2"}},
		},
	}
	resp, err := db.CreateContainer(ctx, props, nil)
	if err != nil {
		t.Fatalf("a path's language as LCID 1033: %v", err)
	}
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	if got := resp.ContainerProperties.FullTextPolicy; js(got) != js(want) {
		t.Fatalf("fullTextPolicy %s, want it as given: %s", js(got), js(want))
	}
	c, _ := db.NewContainer("lcid")
	createItems(t, c, `{"id":"1","pk":"p","text1":"the swimmers were swimming"}`)
	if got := queryPK(t, c, "p", `SELECT VALUE c.id FROM c WHERE FullTextContains(c.text1, "swim")`); len(got) != 1 {
		t.Fatalf("English stemming on the 1033 path: %v", got)
	}
}

// The gateway's plan for a vector search goes to clients whose pipeline
// lists the NonStreamingOrderBy feature; others get the plan that has the
// server answer the query whole, which they can run.
func TestTheVectorSearchPlanGoesToClientsThatRunIt(t *testing.T) {
	s := orrerytest.Start(t)
	searchFixture(t, s)
	plan := func(features string) string {
		t.Helper()
		h := map[string]string{"x-ms-cosmos-is-query-plan-request": "True", "Content-Type": "application/query+json", "x-ms-documentdb-isquery": "True"}
		if features != "" {
			h["x-ms-cosmos-supported-query-features"] = features
		}
		link := "dbs/db/colls/search"
		r := rawRequest(t, s, "POST", "/"+link+"/docs", "docs", link, []byte(`{"query":"SELECT TOP 5 c.id FROM c ORDER BY VectorDistance(c.textEmbedding, @v)","parameters":[{"name":"@v","value":[1,2,3]}]}`), h)
		if r.status != http.StatusOK {
			t.Fatalf("plan: %d %s", r.status, r.body)
		}
		return string(r.body)
	}
	got := plan("Aggregate,Distinct,MultipleOrderBy,OffsetAndLimit,OrderBy,Top,NonStreamingOrderBy,HybridSearch")
	// dotproduct: the largest first.
	for _, want := range []string{`"hasNonStreamingOrderBy":true`, `"orderBy":["Descending"]`, `"top":5`, `ORDER BY VectorDistance(c.textEmbedding, @v)`} {
		if !strings.Contains(got, want) {
			t.Errorf("the plan for a client that runs it lacks %s: %s", want, got)
		}
	}
	if got := plan("Aggregate,Distinct,OrderBy,Top"); strings.Contains(got, `"hasNonStreamingOrderBy":true`) {
		t.Errorf("a client without NonStreamingOrderBy got the non-streaming plan: %s", got)
	}
}
