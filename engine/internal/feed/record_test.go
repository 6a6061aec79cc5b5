package feed

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/orrery-db/orrery/engine/internal/keys"
)

var coll = []byte{1, 2, 3, 4, 5, 6, 7, 8}

// itemKey is the key of item id in the partition pkEnc of a container
// with len(paths) partition key paths.
func itemKey(paths int, pkEnc, id string) []byte {
	epk := bytes.Repeat([]byte{0x3c}, 16*paths)
	return append(keys.ItemPartitionPrefix(coll, epk, []byte(pkEnc)), id...)
}

// TestRecordDecodesToWhatWasEncoded: every field of a change record
// survives its stored form, and a value cut short or of another version is
// refused rather than misread.
func TestRecordDecodesToWhatWasEncoded(t *testing.T) {
	in := &Record{Op: Delete, TTLExpired: true, Crts: 1700000000, PrevLSN: 41,
		ItemKey: itemKey(1, `["a"]`, "x"), Doc: []byte(`{"id":"x"}`)}
	v := in.Encode()
	out, err := DecodeRecord(42, v)
	if err != nil {
		t.Fatal(err)
	}
	in.LSN = 42
	if out.LSN != in.LSN || out.Op != in.Op || out.TTLExpired != in.TTLExpired || out.Crts != in.Crts ||
		out.PrevLSN != in.PrevLSN || !bytes.Equal(out.ItemKey, in.ItemKey) || !bytes.Equal(out.Doc, in.Doc) {
		t.Fatalf("decoded %+v, want %+v", out, in)
	}
	for n := 0; n < headerLen+len(in.ItemKey); n++ {
		if _, err := DecodeRecord(42, v[:n]); err == nil {
			t.Fatalf("a record cut to %d bytes decoded", n)
		}
	}
	other := append([]byte{2}, v[1:]...)
	if _, err := DecodeRecord(42, other); err == nil {
		t.Fatal("a record of another version decoded")
	}
}

// TestDeleteRecordNamesItsItemAndPartitionKey: the wire form of a delete
// carries the deleted version as previous, the item's id and its partition
// key as path → value without undefined components; a create carries
// neither id nor expiry flag.
func TestDeleteRecordNamesItsItemAndPartitionKey(t *testing.T) {
	c := Container{RID: coll, Paths: []string{"/tenant", "/user", "/session"}}
	del := &Record{LSN: 9, Op: Delete, TTLExpired: true, Crts: 100, PrevLSN: 7,
		ItemKey: itemKey(3, `["t1",{},"s\"1"]`, `i"d`), Doc: []byte(`{"id":"i\"d"}`)}
	var got struct {
		Current  map[string]any
		Previous map[string]any
		Metadata map[string]any
	}
	if err := json.Unmarshal(c.Document(del), &got); err != nil {
		t.Fatalf("%s: %v", c.Document(del), err)
	}
	if len(got.Current) != 0 || got.Previous["id"] != `i"d` {
		t.Fatalf("current %v, previous %v", got.Current, got.Previous)
	}
	m := got.Metadata
	if m["operationType"] != "delete" || m["lsn"] != 9.0 || m["crts"] != 100.0 || m["previousImageLSN"] != 7.0 ||
		m["id"] != `i"d` || m["timeToLiveExpired"] != true {
		t.Fatalf("metadata %v", m)
	}
	pk, _ := json.Marshal(m["partitionKey"])
	if string(pk) != `{"session":"s\"1","tenant":"t1"}` {
		t.Fatalf("partitionKey %s", pk)
	}

	create := &Record{LSN: 10, Op: Create, Crts: 101, ItemKey: del.ItemKey, Doc: []byte(`{"id":"n"}`)}
	var cr map[string]map[string]any
	if err := json.Unmarshal(c.Document(create), &cr); err != nil {
		t.Fatal(err)
	}
	if cr["current"]["id"] != "n" || cr["previous"] != nil || cr["metadata"]["operationType"] != "create" {
		t.Fatalf("create %v", cr)
	}
	for _, k := range []string{"id", "partitionKey", "timeToLiveExpired", "previousImageLSN"} {
		if _, ok := cr["metadata"][k]; ok {
			t.Fatalf("a create's metadata has %s: %v", k, cr["metadata"])
		}
	}
}

// TestETagReadsBackItsPosition: a page's ETag, quoted, weak or bare, reads
// back as its position; anything else is refused.
func TestETagReadsBackItsPosition(t *testing.T) {
	for _, s := range []string{FormatETag(1234), "W/" + FormatETag(1234), "1234", ` "1234" `} {
		if n, ok := ParseETag(s); !ok || n != 1234 {
			t.Fatalf("ParseETag(%q) = %d, %v", s, n, ok)
		}
	}
	for _, s := range []string{"", `""`, `"x"`, "-1", `"12`} {
		if _, ok := ParseETag(s); ok {
			t.Fatalf("ParseETag(%q) accepted", s)
		}
	}
}

// TestWithLSNAddsTheSystemProperty: the change feed's copy of an item
// carries _lsn, whatever the item's other properties and spacing.
func TestWithLSNAddsTheSystemProperty(t *testing.T) {
	for in, want := range map[string]string{
		`{}`:          `{"_lsn":5}`,
		`{ }`:         `{ "_lsn":5}`,
		`{"a":1}`:     `{"a":1,"_lsn":5}`,
		`{"a":{}} `:   `{"a":{},"_lsn":5} `,
		`{"a":[1] }`:  `{"a":[1] ,"_lsn":5}`,
		`not an item`: `not an item`,
	} {
		if got := string(WithLSN([]byte(in), 5)); got != want {
			t.Errorf("WithLSN(%s) = %s, want %s", in, got, want)
		}
	}
}
