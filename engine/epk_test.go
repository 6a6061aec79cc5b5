package engine

import "testing"

func TestEffectivePartitionKeyVectors(t *testing.T) {
	hash := &PartitionKeyDefinition{Paths: []string{"/pk"}, Kind: "Hash", Version: 2}
	multi := &PartitionKeyDefinition{Paths: []string{"/a", "/b"}, Kind: "MultiHash", Version: 2}
	tests := []struct {
		header string
		def    *PartitionKeyDefinition
		want   string
	}{
		{`[""]`, hash, "32E9366E637A71B4E710384B2F4970A0"},
		{`["a"]`, hash, "3A5381E1114EB8D3FCC90795045B49B7"},
		{`["redmond"]`, hash, "22E342F38A486A088463DFF7838A5963"},
		{`[5]`, hash, "19C08621B135968252FB34B4CF66F811"},
		{`[true]`, hash, "0E711127C5B5A8E4726AC6DD306A3E59"},
		{`[null]`, hash, "378867E4430E67857ACE5C908374FE16"},
		{`[{}]`, hash, "11622DAA78F835834610ABE56EFF5CB5"},
		{`["a","b"]`, multi, "3A5381E1114EB8D3FCC90795045B49B7195644569A78B1E22D200348AF9416CE"},
	}
	for _, tt := range tests {
		pk, err := ParsePartitionKeyHeader(tt.header)
		if err != nil {
			t.Fatalf("%s: %v", tt.header, err)
		}
		if got := EPKHex(effectivePartitionKey(tt.def, pk)); got != tt.want {
			t.Errorf("EPK(%s) = %s, want %s", tt.header, got, tt.want)
		}
	}
}

func TestParsePartitionKeyHeader(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{`["a"]`, `["a"]`, false},
		{`["a", 5]`, `["a",5]`, false},
		{`["\u00e9"]`, `["é"]`, false},
		{`[null]`, `[null]`, false},
		{`[{}]`, `[{}]`, false},
		{`[]`, `[]`, false},
		{`[true,false]`, `[true,false]`, false},
		{`"a"`, ``, true},
		{`[[1]]`, ``, true},
		{`[{"a":1}]`, ``, true},
		{`not json`, ``, true},
	}
	for _, tt := range tests {
		pk, err := ParsePartitionKeyHeader(tt.in)
		if (err != nil) != tt.wantErr {
			t.Fatalf("%s: err = %v", tt.in, err)
		}
		if err == nil && pk.String() != tt.want {
			t.Errorf("%s: got %s want %s", tt.in, pk, tt.want)
		}
	}
}
