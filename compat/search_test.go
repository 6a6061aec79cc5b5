package compat

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
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
