package compat

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/orrerytest"
)

// TestGoSDKItemIDsAnswerAsTheServicesGateway: through the Go SDK, ids are
// created, read, replaced and deleted with the statuses the service's
// routing gateway answers (the SDK's own emulator tests record them): an id
// ending with whitespace, or holding '/', '\', '#' or a percent-encoded
// character, is created and then 401 for every request that addresses it,
// one holding a tab, carriage return or line feed 400; leading and inner
// whitespace, '?' and other allowed characters work.
func TestGoSDKItemIDsAnswerAsTheServicesGateway(t *testing.T) {
	s := orrerytest.Start(t)
	c := newContainer(t, s, "db", "ids", "/pk")
	tests := []itemIDCase{
		{"plain", "Test", 201, 200, 200, 204, 200},
		{"inner whitespace", "This is a test", 201, 200, 200, 204, 200},
		{"leading whitespace", " Test", 201, 200, 200, 204, 200},
		{"trailing whitespace", "Test ", 201, 401, 401, 401, 401},
		{"trailing whitespaces", "Test  ", 201, 401, 401, 401, 401},
		{"allowed special characters", "WithAllowedSpecial,=.:~+-@()^${}[]!_Chars", 201, 200, 200, 204, 200},
		{"carriage return", "With\rCarriageReturn", 201, 400, 400, 400, 400},
		{"tab", "With\tTab", 201, 400, 400, 400, 400},
		{"line feed", "With\nLineFeed", 201, 400, 400, 400, 400},
		{"unicode", "WithUnicode鱀", 201, 200, 200, 204, 200},
		{"ending with percent-encoded whitespace", "IdEndingWithPercentEncodedWhitespace%20", 201, 401, 401, 401, 401},
		{"percent-encoded special character", "WithPercentEncodedSpecialChar%E9%B1%80", 201, 401, 401, 401, 401},
		{"literal percent", "100%", 201, 200, 200, 204, 200},
		{"question mark", "Disallowed?Chars", 201, 200, 200, 204, 200},
		{"forward slash", "Disallowed/Chars", 201, 401, 401, 401, 401},
		{"backslash", "Disallowed\\Chars", 201, 401, 401, 401, 401},
		{"pound sign", "Disallowed#Chars", 201, 401, 401, 401, 401},
	}
	checkItemIDStatuses(t, c, tests)
}

// TestGoSDKItemIDsThroughTheComputeGatewayAreAddressedAsCreated: through the
// compute gateway (the emulator's second port), every id the routing gateway
// refuses to address (trailing whitespace, '/', '\', '#', a percent-escape,
// a control character) is read, replaced, patched and deleted like any
// other, as the Go SDK's own emulator suite records; the same items through
// the main port still answer as the routing gateway.
func TestGoSDKItemIDsThroughTheComputeGatewayAreAddressedAsCreated(t *testing.T) {
	s := orrerytest.StartWith(t, orrerytest.Options{ComputeGateway: true})
	newContainer(t, s, "db", "ids", "/pk")
	cred, err := azcosmos.NewKeyCredential(s.Key)
	if err != nil {
		t.Fatal(err)
	}
	cgw, err := azcosmos.NewClientWithKey(s.ComputeGatewayEndpoint, cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cgw.NewContainer("db", "ids")
	if err != nil {
		t.Fatal(err)
	}
	var tests []itemIDCase
	for _, id := range []string{"Test", "This is a test", " Test", "Test ", "Test  ",
		"WithAllowedSpecial,=.:~+-@()^${}[]!_Chars", "With\rCarriageReturn", "With\tTab", "With\nLineFeed",
		"WithUnicode鱀", "IdEndingWithPercentEncodedWhitespace%20", "WithPercentEncodedSpecialChar%E9%B1%80",
		"100%", "Disallowed?Chars", "Disallowed/Chars", "Disallowed\\Chars", "Disallowed#Chars"} {
		tests = append(tests, itemIDCase{id, id, 201, 200, 200, 204, 200})
	}
	checkItemIDStatuses(t, c, tests)

	// The main port still answers as the routing gateway.
	main := s.Client
	mc, err := main.NewContainer("db", "ids")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	body := mustJSON(t, map[string]string{"id": "Test ", "pk": "Test "})
	if _, err := c.CreateItem(ctx, azcosmos.NewPartitionKeyString("Test "), body, nil); err != nil {
		t.Fatal(err)
	}
	_, err = mc.ReadItem(ctx, azcosmos.NewPartitionKeyString("Test "), "Test ", nil)
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusUnauthorized {
		t.Fatalf("read of \"Test \" through the main port: %v, want 401", err)
	}
}

// itemIDCase is an id and the statuses of its create, read, replace, delete
// and patch.
type itemIDCase struct {
	name, id                        string
	create, read, replace, del, pat int
}

// checkItemIDStatuses creates, reads, replaces, patches and deletes each
// case's id through c and checks the statuses.
func checkItemIDStatuses(t *testing.T, c *azcosmos.ContainerClient, tests []itemIDCase) {
	t.Helper()
	ctx := context.Background()
	status := func(resp azcosmos.ItemResponse, err error) int {
		var re *azcore.ResponseError
		if errors.As(err, &re) {
			return re.StatusCode
		}
		if err != nil {
			t.Fatal(err)
		}
		return resp.RawResponse.StatusCode
	}
	for _, tc := range tests {
		pk := azcosmos.NewPartitionKeyString(tc.id)
		body := mustJSON(t, map[string]string{"id": tc.id, "pk": tc.id})
		got := []int{status(c.CreateItem(ctx, pk, body, nil))}
		got = append(got, status(c.ReadItem(ctx, pk, tc.id, nil)))
		got = append(got, status(c.ReplaceItem(ctx, pk, tc.id, body, nil)))
		got = append(got, status(c.PatchItem(ctx, pk, tc.id, patchSet("/v", 1), nil)))
		got = append(got, status(c.DeleteItem(ctx, pk, tc.id, nil)))
		want := []int{tc.create, tc.read, tc.replace, tc.pat, tc.del}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s (%q): create, read, replace, patch, delete answered %v, want %v", tc.name, tc.id, got, want)
				break
			}
		}
	}
}

func patchSet(path string, v any) azcosmos.PatchOperations {
	var p azcosmos.PatchOperations
	p.AppendSet(path, v)
	return p
}

// TestGoSDKInvalidUTF8IsRefusedAndThePartitionStaysReadable: an item whose
// bytes are not UTF-8 is refused with 400 and not stored, so the SDK's reads
// and queries of its partition keep working.
func TestGoSDKInvalidUTF8IsRefusedAndThePartitionStaysReadable(t *testing.T) {
	s := orrerytest.Start(t)
	c := newContainer(t, s, "db", "utf8", "/pk")
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("p")
	if _, err := c.CreateItem(ctx, pk, []byte(`{"id":"ok","pk":"p","name":"café"}`), nil); err != nil {
		t.Fatal(err)
	}
	for _, body := range [][]byte{
		[]byte("{\"id\":\"bad\",\"pk\":\"p\",\"name\":\"caf\xe9\"}"),
		[]byte("{\"id\":\"bad\",\"pk\":\"p\",\"name\":\"\xed\xa0\x80\"}"), // an encoded surrogate
		[]byte("{\"id\":\"bad\",\"pk\":\"p\",\"n\":1,\"\xff\":2}"),
	} {
		_, err := c.CreateItem(ctx, pk, body, nil)
		wantRefused(t, "create", err, http.StatusBadRequest, "not valid UTF-8")
		_, err = c.UpsertItem(ctx, pk, body, nil)
		wantRefused(t, "upsert", err, http.StatusBadRequest, "not valid UTF-8")
		_, err = c.ReplaceItem(ctx, pk, "ok", body, nil)
		wantRefused(t, "replace", err, http.StatusBadRequest, "not valid UTF-8")
	}
	pager := c.NewQueryItemsPager("SELECT VALUE c.name FROM c", pk, nil)
	var names []string
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatalf("query of the partition: %v", err)
		}
		for _, it := range page.Items {
			names = append(names, string(it))
		}
	}
	if strings.Join(names, ",") != `"café"` {
		t.Fatalf("the partition holds %v", names)
	}
}

// TestGoSDKItemErrorsCarrySessionActivityAndCharge: a 404, 409 or 412 of an
// item operation carries the session token, activity id and request charge,
// as the service's do.
func TestGoSDKItemErrorsCarrySessionActivityAndCharge(t *testing.T) {
	s := orrerytest.Start(t)
	c := newContainer(t, s, "db", "sessions", "/pk")
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("p")
	created, err := c.CreateItem(ctx, pk, []byte(`{"id":"a","pk":"p"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	stale := azcore.ETag(`"stale"`)
	_, readErr := c.ReadItem(ctx, pk, "missing", nil)
	_, createErr := c.CreateItem(ctx, pk, []byte(`{"id":"a","pk":"p"}`), nil)
	_, replaceErr := c.ReplaceItem(ctx, pk, "a", []byte(`{"id":"a","pk":"p"}`), &azcosmos.ItemOptions{IfMatchEtag: &stale})
	for _, tc := range []struct {
		what   string
		err    error
		status int
	}{{"read of a missing item", readErr, 404}, {"second create", createErr, 409}, {"replace with a stale etag", replaceErr, 412}} {
		var re *azcore.ResponseError
		if !errors.As(tc.err, &re) || re.StatusCode != tc.status {
			t.Fatalf("%s: %v, want %d", tc.what, tc.err, tc.status)
		}
		h := re.RawResponse.Header
		for _, name := range []string{"x-ms-session-token", "x-ms-activity-id", "x-ms-request-charge"} {
			if h.Get(name) == "" {
				t.Errorf("%s: no %s header", tc.what, name)
			}
		}
		if tok := h.Get("x-ms-session-token"); tok != "" && !strings.HasPrefix(tok, "0:") {
			t.Errorf("%s: session token %q", tc.what, tok)
		}
	}
	if created.SessionToken == nil || *created.SessionToken == "" {
		t.Fatal("the create carries no session token")
	}
}

// TestGoSDKResponsesCarryContentLengthAtEverySize: an item's answer, read
// or written back (over HTTPS, as orrery serve serves), carries its
// Content-Length and is never chunked, whatever its size: the server sets
// the header itself only for bodies net/http would not buffer whole, and
// leaves the smaller ones to net/http, which writes the same header for them.
func TestGoSDKResponsesCarryContentLengthAtEverySize(t *testing.T) {
	s := orrerytest.StartWith(t, orrerytest.Options{TLS: true})
	c := newContainer(t, s, "db", "sizes", "/pk")
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("p")
	check := func(what string, raw *http.Response, body []byte) {
		t.Helper()
		if len(raw.TransferEncoding) > 0 || raw.ContentLength != int64(len(body)) || raw.Header.Get("Content-Length") == "" {
			t.Fatalf("%s of %d bytes: Content-Length %d (%q), transfer encoding %v", what, len(body), raw.ContentLength,
				raw.Header.Get("Content-Length"), raw.TransferEncoding)
		}
		if _, err := http.ParseTime(raw.Header.Get("Date")); err != nil {
			t.Fatalf("%s of %d bytes: Date %q: %v", what, len(body), raw.Header.Get("Date"), err)
		}
	}
	seen := map[bool]bool{}
	for _, pad := range append([]int{0, 1 << 17}, func() (p []int) {
		for n := 1780; n < 1980; n += 3 {
			p = append(p, n)
		}
		return p
	}()...) {
		id := fmt.Sprintf("i%d", pad)
		doc := []byte(fmt.Sprintf(`{"id":%q,"pk":"p","pad":%q}`, id, strings.Repeat("x", pad)))
		w, err := c.UpsertItem(ctx, pk, doc, &azcosmos.ItemOptions{EnableContentResponseOnWrite: true})
		if err != nil {
			t.Fatal(err)
		}
		check("upsert", w.RawResponse, w.Value)
		if pad == 0 {
			// Without its body (the SDK's default): the Date the server
			// sets itself on answers of few headers.
			w, err := c.UpsertItem(ctx, pk, doc, nil)
			if err != nil {
				t.Fatal(err)
			}
			check("upsert without its body", w.RawResponse, nil)
			if d, _ := http.ParseTime(w.RawResponse.Header.Get("Date")); time.Since(d) > time.Hour || time.Until(d) > time.Hour {
				t.Fatalf("Date %q is not now", w.RawResponse.Header.Get("Date"))
			}
		}
		r, err := c.ReadItem(ctx, pk, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		check("read", r.RawResponse, r.Value)
		seen[len(r.Value) > 2048] = true
	}
	if !seen[true] || !seen[false] {
		t.Fatalf("the bodies did not straddle 2048 bytes: %v", seen)
	}
}
