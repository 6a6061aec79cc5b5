package query

import (
	"slices"
	"strings"
	"testing"
)

func TestRootFields(t *testing.T) {
	tests := []struct {
		query string
		want  string // sorted, comma separated; "*" for the whole document; "+" first when the document is written out
	}{
		{"SELECT * FROM c", "+"},
		{"SELECT VALUE c FROM c", "+"},
		{"SELECT c FROM c", "+"},
		{"SELECT * FROM c WHERE c.pk = @pk ORDER BY c._ts", "+_ts,pk"},
		{"SELECT DISTINCT * FROM c", "*"},
		{"SELECT DISTINCT VALUE c FROM c", "*"},
		{"SELECT c, IS_DEFINED(c) FROM c", "*"},
		{"SELECT VALUE c FROM c JOIN t IN c.tags WHERE t = 1", "+tags"},
		{"SELECT c.id, c.name FROM c WHERE c.cat = 'x' ORDER BY c.ts", "cat,id,name,ts"},
		{"SELECT VALUE COUNT(1) FROM c", ""},
		{"SELECT 1", ""},
		{"SELECT t FROM c JOIN t IN c.tags WHERE c.kind = 1", "kind,tags"},
		{"SELECT * FROM c.children", "children"},
		{"SELECT VALUE x FROM x IN c.items", "items"},
		{`SELECT VALUE c["a b"].x FROM c`, "a b"},
		{"SELECT VALUE c[@p] FROM c", "*"},
		{"SELECT VALUE IS_DEFINED(c) FROM c", "*"},
		{"SELECT c.id, EXISTS(SELECT VALUE t FROM t IN c.tags WHERE t = c.main) AS e FROM c", "id,main,tags"},
		{"SELECT c.id, ARRAY(SELECT VALUE c FROM x IN c.tags) AS a FROM c", "*"},
		{"SELECT VALUE x FROM (SELECT VALUE c.a FROM c) x", "*"},
		{"SELECT c.g, COUNT(1) FROM c GROUP BY c.g", "g"},
		{"SELECT VALUE r.id FROM root r WHERE r.pk = @pk", "id,pk"},
		{"SELECT VALUE c.id FROM c JOIN (SELECT VALUE s FROM s IN c.sizes WHERE s.n = c.n) z", "id,n,sizes"},
	}
	for _, tt := range tests {
		q, err := Parse(tt.query)
		if err != nil {
			t.Fatalf("%s: %v", tt.query, err)
		}
		got := "*"
		if q.fields != nil {
			var names []string
			for f := range q.fields {
				names = append(names, f)
			}
			slices.Sort(names)
			got = strings.Join(names, ",")
			if q.keepRaw {
				got = "+" + got
			}
		}
		if got != tt.want {
			t.Errorf("%s: fields %q, want %q", tt.query, got, tt.want)
		}
	}
}

func TestDecodeDocumentSkips(t *testing.T) {
	doc := `{"a":1,"big":{"x":[1,{"y":"z\"q"}],"s":"\u00e9"},"b":"two","c":[true,null]}`
	v, err := decodeDocument([]byte(doc), map[string]bool{"a": true, "c": true}, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(encodeJSON(v)); got != `{"a":1,"c":[true,null]}` {
		t.Fatalf("got %s", got)
	}
	for _, bad := range []string{`{"a":1,"big":{"x":}}`, `{"big":[1,}`, `{"big":"unterminated}`, `{"big":tru}`, `{"big":{"k" 1}}`} {
		if _, err := decodeDocument([]byte(bad), map[string]bool{"a": true}, false); err == nil {
			t.Errorf("decodeDocument(%s) succeeded, want error", bad)
		}
	}
}

func TestDecodeDocumentKeepsCanonicalText(t *testing.T) {
	only := map[string]bool{"a": true}
	tests := []struct {
		doc     string
		keepRaw bool // the text itself was kept
	}{
		{`{"a":1,"b":{"c":[1.5,"x\"y",null,true]},"d":"\u0001"}`, false}, // \u0001 is written \u0001 but checked conservatively
		{`{"a":1,"b":{"c":[1.5,"x\"y\n",null,true]},"d":-2}`, true},
		{`{"a":1, "b":2}`, false},       // whitespace
		{`{"a":1,"b":1.0}`, false},      // 1.0 is written 1
		{`{"a":1,"b":1e2}`, false},      // 1e2 is written 100
		{`{"a":1,"b":"\u00e9"}`, false}, // é is written as is
		{`{"a":1,"b":"\/"}`, false},     // / is written as is
		{`{"a":1,"a":2}`, false},        // duplicate key
		{`{"a":1,"b":-0}`, false},       // -0 is written 0
	}
	for _, tt := range tests {
		v, err := decodeDocument([]byte(tt.doc), only, true)
		if err != nil {
			t.Fatalf("%s: %v", tt.doc, err)
		}
		if got := v.object().raw != ""; got != tt.keepRaw {
			t.Errorf("%s: kept text = %v, want %v", tt.doc, got, tt.keepRaw)
		}
		full, _ := decodeJSON([]byte(tt.doc))
		if string(encodeJSON(v)) != string(encodeJSON(full)) {
			t.Errorf("%s: written as %s, full decoding writes %s", tt.doc, encodeJSON(v), encodeJSON(full))
		}
	}
}
