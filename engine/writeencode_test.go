package engine

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/orrery-db/orrery/engine/internal/jsondoc"
	"github.com/orrery-db/orrery/engine/internal/rids"
)

// TestIndexNumberOfAnIntegerIsParseFloatsValue: the index entry of a JSON
// number read by the integer shortcut is the one of strconv.ParseFloat's
// value, at the shortcut's edges (15 digits, signs, zeros) and past them.
func TestIndexNumberOfAnIntegerIsParseFloatsValue(t *testing.T) {
	nums := []string{"0", "-0", "1", "-1", "7", "10", "1767322001", "-1767322001", "999999999999999", "-999999999999999",
		"1000000000000000", "9007199254740993", "12345678901234567890", "0.5", "-0.0", "1e3", "1E-2", "-1.5e+10", "2.0", "1e400", "-1e-400",
		"123456789012345", "000", "01"}
	for i := range 2000 {
		nums = append(nums, strconv.FormatInt(int64(i)*7919-5000000, 10))
	}
	for _, n := range nums {
		got, gerr := appendRawIndexValue(nil, []byte(n))
		f, perr := strconv.ParseFloat(n, 64)
		if perr != nil {
			if gerr == nil {
				t.Errorf("%s: indexed as %x, ParseFloat refuses it: %v", n, got, perr)
			}
			continue
		}
		if want := appendIndexNumber(nil, f); gerr != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %x (%v), want %x (ParseFloat %v)", n, got, gerr, want, f)
		}
	}
}

// TestAnETagIsItsFormattedFields: the ETag written by position is the
// one fmt writes from the same fields, at the fields' extremes and on
// 5,000 random ones.
func TestAnETagIsItsFormattedFields(t *testing.T) {
	items := []storedItem{{}, {lsn: 1, rid: 2, write: 3}, {lsn: math.MaxUint64, rid: math.MaxUint64, write: math.MaxUint16},
		{lsn: 0x123456789abcdef0, rid: 0xfedcba9876543210, write: 0xbeef}}
	r := rand.New(rand.NewPCG(40, 4))
	for range 5000 {
		items = append(items, storedItem{lsn: r.Uint64() >> r.IntN(64), rid: r.Uint64(), write: uint16(r.Uint32())})
	}
	for _, it := range items {
		want := fmt.Sprintf(`"%08x-%04x-%04x-0000-%012x"`, it.lsn>>32&0xFFFFFFFF, it.rid&0xFFFF, it.write, it.lsn&0xFFFFFFFFFFFF)
		if got := it.etag(); got != want || len(got) != etagLen {
			t.Errorf("%+v: %s, want %s", it, got, want)
		}
		if got := string(it.appendETag([]byte("x"))); got != "x"+want {
			t.Errorf("appended: %s", got)
		}
	}
}

// TestIndexStringEscapesEveryZeroByte: a string's index encoding escapes
// each zero byte (runs of them, at either end) and cuts a long string,
// as a byte-by-byte encoding does, from a string or from bytes.
func TestIndexStringEscapesEveryZeroByte(t *testing.T) {
	byByte := func(s string, terminated bool) []byte {
		end := []byte{0, 1}
		if len(s) > maxIndexedString {
			s, end = s[:maxIndexedString], []byte{0, 2}
		}
		var k []byte
		for i := 0; i < len(s); i++ {
			if s[i] == 0 {
				k = append(k, 0, 0xFF)
			} else {
				k = append(k, s[i])
			}
		}
		if terminated {
			k = append(k, end...)
		}
		return k
	}
	for _, s := range []string{"", "a", "\x00", "\x00\x00", "a\x00b", "\x00ab\x00", "ab\x00\x00cd\x00", string(make([]byte, 150)),
		"x" + string(make([]byte, 120)), fmt.Sprintf("%0150d", 7) + "\x00"} {
		for _, term := range []bool{false, true} {
			want := append([]byte("p"), byByte(s, term)...)
			if got := appendIndexString([]byte("p"), s, term); !bytes.Equal(got, want) {
				t.Errorf("%q %v: %x, want %x", s, term, got, want)
			}
			if got := appendIndexString([]byte("p"), []byte(s), term); !bytes.Equal(got, want) {
				t.Errorf("%q as bytes %v: %x, want %x", s, term, got, want)
			}
		}
	}
}

// TestAnItemsSelfLinkIsPlainWhenItsContainersRIDsAre: put writes an item's
// _self link as it is, not escaped, when the database's and the
// container's RIDs are plain text (jsondoc.IsPlainText); the item's own
// RID, base64 (rids.Append), never decides. So the link, built as put
// builds it, is a plain JSON string exactly when both RIDs are plain.
func TestAnItemsSelfLinkIsPlainWhenItsContainersRIDsAre(t *testing.T) {
	r := rand.New(rand.NewPCG(40, 2))
	plainBytes, others := "aZ09+=-/ ~", "\"\\\x00\x01\x1f\x7f\x80\xc3\xa9\xff"
	text := func() string {
		b := make([]byte, r.IntN(13))
		for i := range b {
			if r.IntN(20) == 0 {
				b[i] = others[r.IntN(len(others))]
			} else {
				b[i] = plainBytes[r.IntN(len(plainBytes))]
			}
		}
		return string(b)
	}
	plain := 0
	for range 20000 {
		db, coll := text(), text()
		rid := make([]byte, 16)
		for i := range rid {
			rid[i] = byte(r.Uint32())
		}
		link := rids.Append([]byte(`"dbs/`+db+"/colls/"+coll+"/docs/"), rid)
		link = append(link, `/"`...)
		want := jsondoc.IsPlainString(link)
		if got := jsondoc.IsPlainText(db) && jsondoc.IsPlainText(coll); got != want {
			t.Fatalf("%q: RIDs plain %v, link plain %v", link, got, want)
		}
		if want {
			plain++
		}
	}
	if plain < 1000 || plain > 19000 {
		t.Fatalf("%d of 20000 links plain: too few of one kind to tell", plain)
	}
}

// BenchmarkAppendETag is the ETag a write formats twice (the record's
// _etag, the answer's header) and a read once.
func BenchmarkAppendETag(b *testing.B) {
	it := storedItem{lsn: 0x123456789abcdef0, rid: 0xfedcba9876543210, write: 0xbeef}
	var buf [etagLen]byte
	for b.Loop() {
		if len(it.appendETag(buf[:0])) != etagLen {
			b.Fatal("short")
		}
	}
}
