package compat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/orrerytest"
)

// The cases of this file follow the Go SDK's own emulator suite
// (emulator_cosmos_query_test.go of the azcosmos module): what it records
// of the service, Orrery answers through the same SDK.

// loadAlternating creates perPK items in each of pks partitions ("1", "2",
// ...), alternating between the partitions as the SDK's suite does, so
// creation order interleaves them: item i of partition p has id
// i+(p-1)*perPK.
func loadAlternating(t *testing.T, c *azcosmos.ContainerClient, pks, perPK int) {
	t.Helper()
	for i := 0; i < perPK; i++ {
		for p := 1; p <= pks; p++ {
			id := fmt.Sprint(i + (p-1)*perPK)
			body := fmt.Sprintf(`{"id":%q,"pk":"%d","someProp":"some_%s"}`, id, p, id)
			if _, err := c.CreateItem(context.Background(), azcosmos.NewPartitionKeyString(fmt.Sprint(p)), []byte(body), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// pageIDs pages through a query and returns the ids of each page.
func pageIDs(t *testing.T, c *azcosmos.ContainerClient, q string, pk azcosmos.PartitionKey, opt *azcosmos.QueryOptions) ([][]string, error) {
	t.Helper()
	pager := c.NewQueryItemsPager(q, pk, opt)
	var pages [][]string
	for pager.More() {
		page, err := pager.NextPage(context.Background())
		if err != nil {
			return pages, err
		}
		ids := []string{}
		for _, it := range page.Items {
			var v struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(it, &v) != nil || v.ID == "" {
				var s string
				if err := json.Unmarshal(it, &s); err != nil {
					t.Fatalf("result %s is neither an item nor an id", it)
				}
				v.ID = s
			}
			ids = append(ids, v.ID)
		}
		if pager.More() && page.ContinuationToken == nil {
			t.Fatal("the pager has more pages but the page carries no continuation")
		}
		pages = append(pages, ids)
	}
	return pages, nil
}

// TestGoSDKQuerySpanningPartitionsIsRefusedWhenCrossPartitionIsDisabled:
// with EnableCrossPartitionQuery false the SDK leaves the
// x-ms-documentdb-query-enablecrosspartition header out, and the service
// answers a query that spans partitions 400; a partition key, in the
// request or in the filter, makes the same query single-partition and it
// runs.
func TestGoSDKQuerySpanningPartitionsIsRefusedWhenCrossPartitionIsDisabled(t *testing.T) {
	s := orrerytest.Start(t)
	c := newContainer(t, s, "db", "nocross", "/pk")
	loadAlternating(t, c, 2, 10)
	off := false
	opt := &azcosmos.QueryOptions{PageSizeHint: 5, EnableCrossPartitionQuery: &off}

	_, err := pageIDs(t, c, "SELECT * FROM c", azcosmos.NewPartitionKey(), opt)
	var re *azcore.ResponseError
	if statusOf(t, err) != http.StatusBadRequest || !errors.As(err, &re) ||
		!strings.Contains(err.Error(), "Cross partition query is required but disabled") {
		t.Fatalf("a query spanning partitions with cross-partition disabled answered %v, want the service's 400", err)
	}

	pages, err := pageIDs(t, c, "SELECT * FROM c", azcosmos.NewPartitionKeyString("1"), opt)
	if err != nil || len(pages) != 2 {
		t.Fatalf("with a partition key: %v pages %v, want 2 pages", err, pages)
	}
	pages, err = pageIDs(t, c, "SELECT * FROM c WHERE c.pk = '2'", azcosmos.NewPartitionKey(), opt)
	if err != nil || len(pages) != 2 || pages[0][0] != "10" {
		t.Fatalf("with the partition key in the filter: %v pages %v, want 2 pages of partition 2", err, pages)
	}
	// Enabled (the SDK's default) the same query runs.
	if _, err := pageIDs(t, c, "SELECT * FROM c", azcosmos.NewPartitionKey(), &azcosmos.QueryOptions{PageSizeHint: 5}); err != nil {
		t.Fatal(err)
	}
}

// TestGoSDKQuerySpanningPartitionsPagesAsTheServicesGateway: the gateway
// ends a full page of a query spanning partitions with a continuation
// without looking for a next row, so 20 items in pages of 5 come in five
// pages, the last empty, in creation order; a page short of full is the
// last. Within one partition the page that takes the last item is the
// last, full or not.
func TestGoSDKQuerySpanningPartitionsPagesAsTheServicesGateway(t *testing.T) {
	s := orrerytest.Start(t)
	c := newContainer(t, s, "db", "paging", "/pk")
	loadAlternating(t, c, 2, 10)
	opt := &azcosmos.QueryOptions{PageSizeHint: 5}

	pages, err := pageIDs(t, c, "SELECT * FROM c", azcosmos.NewPartitionKey(), opt)
	if err != nil {
		t.Fatal(err)
	}
	want := "[[0 10 1 11 2] [12 3 13 4 14] [5 15 6 16 7] [17 8 18 9 19] []]"
	if got := fmt.Sprint(pages); got != want {
		t.Fatalf("pages %s, want %s", got, want)
	}
	if opt.ContinuationToken != nil {
		t.Fatal("the pager changed the caller's options")
	}

	pages, err = pageIDs(t, c, "SELECT VALUE c.id FROM c", azcosmos.NewPartitionKeyString("1"), opt)
	if err != nil || fmt.Sprint(pages) != "[[0 1 2 3 4] [5 6 7 8 9]]" {
		t.Fatalf("within one partition: pages %v %v, want two full pages", pages, err)
	}

	pages, err = pageIDs(t, c, "SELECT * FROM c WHERE c.n = 1 OR STARTSWITH(c.id, '1')", azcosmos.NewPartitionKey(), opt)
	if err != nil || len(pages) != 3 || len(pages[2]) != 1 {
		t.Fatalf("a short last page: pages %v %v, want 11 ids in pages of 5, 5 and 1", pages, err)
	}
}
