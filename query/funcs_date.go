package query

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Ticks are 100-nanosecond intervals since the Unix epoch.
const (
	nanosPerTick  = 100
	ticksPerMilli = 10000
)

// formatDateTime renders t as YYYY-MM-DDThh:mm:ss.fffffffZ (7 fraction digits).
func formatDateTime(t time.Time) string {
	t = t.UTC()
	return fmt.Sprintf("%04d-%02d-%02dT%02d:%02d:%02d.%07dZ", t.Year(), int(t.Month()), t.Day(),
		t.Hour(), t.Minute(), t.Second(), t.Nanosecond()/nanosPerTick)
}

// parseDateTime accepts the ISO 8601 UTC forms the service accepts:
// YYYY-MM-DD, YYYY-MM-DDThh:mm, YYYY-MM-DDThh:mm:ss, with an optional
// fraction of up to 7 digits and an optional trailing Z.
func parseDateTime(s string) (time.Time, bool) {
	s = strings.TrimSuffix(s, "Z")
	num := func(part string) (int, bool) {
		if part == "" {
			return 0, false
		}
		for i := 0; i < len(part); i++ {
			if !isDigit(part[i]) {
				return 0, false
			}
		}
		n, err := strconv.Atoi(part)
		return n, err == nil
	}
	if len(s) < 10 || s[4] != '-' || s[7] != '-' {
		return time.Time{}, false
	}
	y, ok1 := num(s[0:4])
	mo, ok2 := num(s[5:7])
	d, ok3 := num(s[8:10])
	if !ok1 || !ok2 || !ok3 {
		return time.Time{}, false
	}
	var h, mi, sec, frac int
	rest := s[10:]
	if rest != "" {
		if rest[0] != 'T' || len(rest) < 6 || rest[3] != ':' {
			return time.Time{}, false
		}
		var ok bool
		if h, ok = num(rest[1:3]); !ok {
			return time.Time{}, false
		}
		if mi, ok = num(rest[4:6]); !ok {
			return time.Time{}, false
		}
		rest = rest[6:]
		if rest != "" {
			if rest[0] != ':' || len(rest) < 3 {
				return time.Time{}, false
			}
			if sec, ok = num(rest[1:3]); !ok {
				return time.Time{}, false
			}
			rest = rest[3:]
			if rest != "" {
				if rest[0] != '.' || len(rest) < 2 || len(rest) > 8 {
					return time.Time{}, false
				}
				f := rest[1:]
				if frac, ok = num(f); !ok {
					return time.Time{}, false
				}
				for i := len(f); i < 7; i++ {
					frac *= 10
				}
			}
		}
	}
	if mo < 1 || mo > 12 || d < 1 || d > daysIn(y, mo) || h > 23 || mi > 59 || sec > 59 {
		return time.Time{}, false
	}
	return time.Date(y, time.Month(mo), d, h, mi, sec, frac*nanosPerTick, time.UTC), true
}

func daysIn(y, m int) int {
	return time.Date(y, time.Month(m)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// dateParts maps every accepted date-part spelling to its canonical name.
var dateParts = map[string]string{
	"year": "year", "yyyy": "year", "yy": "year",
	"month": "month", "mm": "month", "m": "month",
	"day": "day", "dd": "day", "d": "day",
	"hour": "hour", "hh": "hour",
	"minute": "minute", "mi": "minute", "n": "minute",
	"second": "second", "ss": "second", "s": "second",
	"millisecond": "millisecond", "ms": "millisecond",
	"microsecond": "microsecond", "mcs": "microsecond",
	"nanosecond": "nanosecond", "ns": "nanosecond",
}

func datePart(v value) (string, bool) {
	if v.k != kString {
		return "", false
	}
	p, ok := dateParts[strings.ToLower(v.str())]
	return p, ok
}

func ticksOf(t time.Time) int64 { return t.Unix()*10_000_000 + int64(t.Nanosecond()/nanosPerTick) }

func timeOfTicks(ticks int64) time.Time {
	return time.Unix(floorDiv(ticks, 10_000_000), floorMod(ticks, 10_000_000)*nanosPerTick).UTC()
}

func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }

// unitDuration is the fixed length of the time parts (not year or month).
var unitDuration = map[string]time.Duration{
	"day": 24 * time.Hour, "hour": time.Hour, "minute": time.Minute, "second": time.Second,
	"millisecond": time.Millisecond, "microsecond": time.Microsecond, "nanosecond": time.Nanosecond,
}

// validYear reports whether t is representable in the service's format.
func validYear(t time.Time) bool { return t.Year() >= 1 && t.Year() <= 9999 }

func init() {
	register("GETCURRENTDATETIME", 0, 0, func(c *evalCtx, _ []value) value { return strV(formatDateTime(c.now)) })
	register("GETCURRENTDATETIMESTATIC", 0, 0, func(c *evalCtx, _ []value) value { return strV(formatDateTime(c.now)) })
	register("GETCURRENTTIMESTAMP", 0, 0, func(c *evalCtx, _ []value) value { return numV(float64(c.now.UnixMilli())) })
	register("GETCURRENTTIMESTAMPSTATIC", 0, 0, func(c *evalCtx, _ []value) value { return numV(float64(c.now.UnixMilli())) })
	register("GETCURRENTTICKS", 0, 0, func(c *evalCtx, _ []value) value { return numV(float64(ticksOf(c.now))) })
	register("GETCURRENTTICKSSTATIC", 0, 0, func(c *evalCtx, _ []value) value { return numV(float64(ticksOf(c.now))) })
	register("DATETIMEADD", 3, 3, func(_ *evalCtx, a []value) value {
		part, ok1 := datePart(a[0])
		n, ok2 := argNum(a, 1)
		s, ok3 := argStr(a, 2)
		if !ok1 || !ok2 || !ok3 {
			return undef
		}
		t, ok := parseDateTime(s)
		if !ok {
			return undef
		}
		n = math.Trunc(n)
		switch part {
		case "year":
			t = addMonthsClamped(t, 12*int(n))
		case "month":
			t = addMonthsClamped(t, int(n))
		default:
			t = t.Add(time.Duration(n) * unitDuration[part])
		}
		if !validYear(t) {
			return undef
		}
		return strV(formatDateTime(t))
	})
	register("DATETIMEDIFF", 3, 3, func(_ *evalCtx, a []value) value {
		part, ok1 := datePart(a[0])
		s1, ok2 := argStr(a, 1)
		s2, ok3 := argStr(a, 2)
		if !ok1 || !ok2 || !ok3 {
			return undef
		}
		t1, ok4 := parseDateTime(s1)
		t2, ok5 := parseDateTime(s2)
		if !ok4 || !ok5 {
			return undef
		}
		return numV(float64(dateDiff(part, t1, t2)))
	})
	register("DATETIMEPART", 2, 2, func(_ *evalCtx, a []value) value {
		part, ok1 := datePart(a[0])
		s, ok2 := argStr(a, 1)
		if !ok1 || !ok2 {
			return undef
		}
		t, ok := parseDateTime(s)
		if !ok {
			return undef
		}
		var n int
		switch part {
		case "year":
			n = t.Year()
		case "month":
			n = int(t.Month())
		case "day":
			n = t.Day()
		case "hour":
			n = t.Hour()
		case "minute":
			n = t.Minute()
		case "second":
			n = t.Second()
		case "millisecond":
			n = t.Nanosecond() / 1e6
		case "microsecond":
			n = t.Nanosecond() / 1e3
		case "nanosecond":
			n = t.Nanosecond()
		}
		return numV(float64(n))
	})
	register("DATETIMEFROMPARTS", 3, 7, func(_ *evalCtx, a []value) value {
		var p [7]int64
		for i := range a {
			n, ok := argInt(a, i)
			if !ok {
				return undef
			}
			p[i] = n
		}
		y, mo, d, h, mi, s, f := p[0], p[1], p[2], p[3], p[4], p[5], p[6]
		if y < 1 || y > 9999 || mo < 1 || mo > 12 || d < 1 || d > int64(daysIn(int(y), int(mo))) ||
			h < 0 || h > 23 || mi < 0 || mi > 59 || s < 0 || s > 59 || f < 0 || f > 9999999 {
			return undef
		}
		t := time.Date(int(y), time.Month(mo), int(d), int(h), int(mi), int(s), int(f)*nanosPerTick, time.UTC)
		return strV(formatDateTime(t))
	})
	register("DATETIMEBIN", 2, 4, func(_ *evalCtx, a []value) value {
		s, ok1 := argStr(a, 0)
		part, ok2 := datePart(a[1])
		if !ok1 || !ok2 {
			return undef
		}
		t, ok := parseDateTime(s)
		if !ok {
			return undef
		}
		size := int64(1)
		if len(a) > 2 {
			if size, ok = argInt(a, 2); !ok || size <= 0 {
				return undef
			}
		}
		origin := time.Unix(0, 0).UTC()
		if len(a) > 3 {
			os, ok := argStr(a, 3)
			if !ok {
				return undef
			}
			if origin, ok = parseDateTime(os); !ok {
				return undef
			}
		}
		var out time.Time
		switch part {
		case "year":
			years := int64(t.Year() - origin.Year())
			if t.Before(origin.AddDate(int(years), 0, 0)) {
				years--
			}
			out = origin.AddDate(int(floorDiv(years, size)*size), 0, 0)
		case "month":
			months := int64((t.Year()-origin.Year())*12 + int(t.Month()) - int(origin.Month()))
			if t.Before(addMonthsClamped(origin, int(months))) {
				months--
			}
			out = addMonthsClamped(origin, int(floorDiv(months, size)*size))
		default:
			// Work in ticks: nanosecond durations overflow across centuries.
			unit := max(int64(unitDuration[part])/nanosPerTick, 1) * size
			d := ticksOf(t) - ticksOf(origin)
			out = timeOfTicks(ticksOf(origin) + floorDiv(d, unit)*unit)
		}
		return strV(formatDateTime(out))
	})
	register("DATETIMETOTICKS", 1, 1, func(_ *evalCtx, a []value) value {
		s, ok := argStr(a, 0)
		if !ok {
			return undef
		}
		t, ok := parseDateTime(s)
		if !ok {
			return undef
		}
		return numV(float64(ticksOf(t)))
	})
	register("DATETIMETOTIMESTAMP", 1, 1, func(_ *evalCtx, a []value) value {
		s, ok := argStr(a, 0)
		if !ok {
			return undef
		}
		t, ok := parseDateTime(s)
		if !ok {
			return undef
		}
		return numV(float64(t.UnixMilli()))
	})
	register("TICKSTODATETIME", 1, 1, func(_ *evalCtx, a []value) value {
		n, ok := argNum(a, 0)
		if !ok || !isFinite(n) {
			return undef
		}
		t := timeOfTicks(int64(math.Trunc(n)))
		if !validYear(t) {
			return undef
		}
		return strV(formatDateTime(t))
	})
	register("TIMESTAMPTODATETIME", 1, 1, func(_ *evalCtx, a []value) value {
		n, ok := argNum(a, 0)
		if !ok || !isFinite(n) || math.Abs(n) > 3e14 {
			return undef
		}
		t := time.UnixMilli(int64(math.Trunc(n))).UTC()
		if !validYear(t) {
			return undef
		}
		return strV(formatDateTime(t))
	})
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// addMonthsClamped adds months, clamping the day to the target month's end
// (2020-01-31 plus one month is 2020-02-29), as the service does.
func addMonthsClamped(t time.Time, months int) time.Time {
	y, m, d := t.Date()
	total := int(m) - 1 + months
	ny := y + floorDivInt(total, 12)
	nm := total - floorDivInt(total, 12)*12 + 1
	if dm := daysIn(ny, nm); d > dm {
		d = dm
	}
	return time.Date(ny, time.Month(nm), d, t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

func floorDivInt(a, b int) int { return int(floorDiv(int64(a), int64(b))) }

// dateDiff counts the part boundaries crossed between t1 and t2.
func dateDiff(part string, t1, t2 time.Time) int64 {
	switch part {
	case "year":
		return int64(t2.Year() - t1.Year())
	case "month":
		return int64((t2.Year()-t1.Year())*12 + int(t2.Month()) - int(t1.Month()))
	}
	unit := int64(unitDuration[part])
	if part == "nanosecond" {
		return (ticksOf(t2) - ticksOf(t1)) * nanosPerTick
	}
	a := floorDiv(ticksOf(t1), unit/nanosPerTick)
	b := floorDiv(ticksOf(t2), unit/nanosPerTick)
	return b - a
}
