package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

const crashDims = 16

// vectorCrashDoc is an item with a vector at /flat (a flat index) and the
// same vector at /graph (a diskANN index).
type vectorCrashDoc struct {
	ID    string    `json:"id"`
	PK    string    `json:"pk"`
	Flat  []float64 `json:"flat"`
	Graph []float64 `json:"graph"`
	Text  string    `json:"text"`
}

// scoredRow is a row of the verification queries.
type scoredRow struct {
	ID string  `json:"id"`
	S  float64 `json:"s"`
}

// TestVectorIndexAfterKillAnswersAsARebuild kills orrery with SIGKILL at
// random moments while writers upsert and delete items of a container with
// a flat and a diskANN vector index, restarts it, and checks that each index
// answers exactly as one rebuilt from the surviving items would: a query
// for every item, closest first, served by the index, gives the same items
// with the same scores as the same query with bruteForce (which reads the
// items, not the index).
func TestVectorIndexAfterKillAnswersAsARebuild(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the server as a child process many times")
	}
	bin := buildBinary(t)
	data := t.TempDir()
	const rounds, writers = 8, 8
	ctx := context.Background()
	pks := []string{"p0", "p1", "p2", "p3"}
	for round := range rounds {
		c := startChild(t, bin, "--data", data)
		client := newClient(t, c.endpoint)
		if round == 0 {
			createVectorContainer(t, client)
		}
		container, _ := client.NewContainer("vcrash", "c")
		verifyVectorIndexes(t, container, pks)
		stop := make(chan struct{})
		wctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(round), uint64(w)))
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					pk := pks[w%len(pks)]
					id := fmt.Sprintf("w%d-%d", w, r.IntN(40))
					if n%5 == 4 {
						container.DeleteItem(wctx, azcosmos.NewPartitionKeyString(pk), id, nil)
						continue
					}
					v := make([]float64, crashDims)
					for i := range v {
						v[i] = math.Round(r.NormFloat64()*1e4) / 1e4
					}
					body, _ := json.Marshal(vectorCrashDoc{ID: id, PK: pk, Flat: v, Graph: v, Text: fmt.Sprintf("round %d writer %d", round, w)})
					container.UpsertItem(wctx, azcosmos.NewPartitionKeyString(pk), body, nil)
				}
			}()
		}
		time.Sleep(time.Duration(100+rand.IntN(300)) * time.Millisecond)
		c.kill()
		close(stop)
		cancel()
		wg.Wait()
	}
	c := startChild(t, bin, "--data", data)
	defer c.kill()
	container, _ := newClient(t, c.endpoint).NewContainer("vcrash", "c")
	n := verifyVectorIndexes(t, container, pks)
	t.Logf("%d rounds of SIGKILL under vector writes; both indexes answer as rebuilt from the %d surviving items", rounds, n)
}

func createVectorContainer(t *testing.T, client *azcosmos.Client) {
	t.Helper()
	ctx := context.Background()
	if _, err := client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "vcrash"}, nil); err != nil {
		t.Fatal(err)
	}
	db, _ := client.NewDatabase("vcrash")
	props := azcosmos.ContainerProperties{
		ID:                     "c",
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}},
		VectorEmbeddingPolicy: &azcosmos.VectorEmbeddingPolicy{VectorEmbeddings: []azcosmos.VectorEmbedding{
			{Path: "/flat", DataType: azcosmos.VectorDataTypeFloat32, DistanceFunction: azcosmos.VectorDistanceFunctionCosine, Dimensions: crashDims},
			{Path: "/graph", DataType: azcosmos.VectorDataTypeFloat32, DistanceFunction: azcosmos.VectorDistanceFunctionEuclidean, Dimensions: crashDims},
		}},
		IndexingPolicy: &azcosmos.IndexingPolicy{
			Automatic:     true,
			IndexingMode:  azcosmos.IndexingModeConsistent,
			IncludedPaths: []azcosmos.IncludedPath{{Path: "/*"}},
			ExcludedPaths: []azcosmos.ExcludedPath{{Path: "/flat/*"}, {Path: "/graph/*"}},
			VectorIndexes: []azcosmos.VectorIndex{
				{Path: "/flat", Type: azcosmos.VectorIndexTypeFlat},
				{Path: "/graph", Type: azcosmos.VectorIndexTypeDiskANN},
			},
		},
	}
	if _, err := db.CreateContainer(ctx, props, nil); err != nil {
		t.Fatal(err)
	}
}

// verifyVectorIndexes compares, in every partition and for both indexes, the
// index's answer to a query for every item with the exact one; it returns
// the number of items.
func verifyVectorIndexes(t *testing.T, container *azcosmos.ContainerClient, pks []string) int {
	t.Helper()
	q := make([]float64, crashDims)
	for i := range q {
		q[i] = float64(i%5) - 2
	}
	total := 0
	for _, pk := range pks {
		for _, path := range []string{"flat", "graph"} {
			text := "SELECT TOP 1000 c.id, VectorDistance(c.%[1]s, @q%[2]s) AS s FROM c ORDER BY VectorDistance(c.%[1]s, @q%[2]s)"
			indexed, used := vectorRows(t, container, pk, fmt.Sprintf(text, path, ""), q)
			exact, _ := vectorRows(t, container, pk, fmt.Sprintf(text, path, ", true"), q)
			if !used {
				t.Fatalf("partition %s: the %s vector index did not serve the query", pk, path)
			}
			if len(indexed) != len(exact) {
				have := map[string]bool{}
				for _, r := range indexed {
					have[r.ID] = true
				}
				var missing []string
				for _, r := range exact {
					if !have[r.ID] {
						missing = append(missing, r.ID)
					}
				}
				t.Fatalf("partition %s, %s index: %d items from the index, %d stored; missing %v", pk, path, len(indexed), len(exact), missing)
			}
			for i := range exact {
				if indexed[i].ID != exact[i].ID || math.Abs(indexed[i].S-exact[i].S) > 1e-9 {
					t.Fatalf("partition %s, %s index: row %d is %+v from the index, %+v from the items", pk, path, i, indexed[i], exact[i])
				}
			}
			if path == "flat" {
				total += len(exact)
			}
		}
	}
	return total
}

// vectorRows runs a query in one partition and reports whether its index
// metrics name a vector index.
func vectorRows(t *testing.T, container *azcosmos.ContainerClient, pk, text string, q []float64) ([]scoredRow, bool) {
	t.Helper()
	opts := &azcosmos.QueryOptions{PopulateIndexMetrics: true, QueryParameters: []azcosmos.QueryParameter{{Name: "@q", Value: q}}}
	used := false
	pager := container.NewQueryItemsPager(text, azcosmos.NewPartitionKeyString(pk), opts)
	var rows []scoredRow
	for pager.More() {
		page, err := pager.NextPage(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		if page.IndexMetrics != nil {
			doc := *page.IndexMetrics
			if b, err := base64.StdEncoding.DecodeString(doc); err == nil {
				doc = string(b)
			}
			used = used || strings.Contains(doc, "vector index")
		}
		for _, raw := range page.Items {
			var r scoredRow
			if err := json.Unmarshal(raw, &r); err != nil {
				t.Fatal(err)
			}
			rows = append(rows, r)
		}
	}
	return rows, used
}
