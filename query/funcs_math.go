package query

import (
	"math"
	"math/rand/v2"
)

func isFinite(f float64) bool { return !math.IsInf(f, 0) && !math.IsNaN(f) }

// numResult turns a non-finite result into undefined, as the service does.
func numResult(f float64) value {
	if !isFinite(f) {
		return undef
	}
	return numV(f)
}

func init() {
	unary := func(name string, f func(float64) float64) {
		register(name, 1, 1, func(_ *evalCtx, a []value) value {
			x, ok := argNum(a, 0)
			if !ok {
				return undef
			}
			return numResult(f(x))
		})
	}
	unary("ABS", math.Abs)
	unary("ACOS", math.Acos)
	unary("ASIN", math.Asin)
	unary("ATAN", math.Atan)
	unary("CEILING", math.Ceil)
	unary("COS", math.Cos)
	unary("COT", func(x float64) float64 { return 1 / math.Tan(x) })
	unary("DEGREES", func(x float64) float64 { return x * 180 / math.Pi })
	unary("EXP", math.Exp)
	unary("FLOOR", math.Floor)
	unary("LOG10", math.Log10)
	unary("RADIANS", func(x float64) float64 { return x * math.Pi / 180 })
	unary("ROUND", func(x float64) float64 { return math.Round(x) })
	unary("SIGN", func(x float64) float64 {
		switch {
		case x > 0:
			return 1
		case x < 0:
			return -1
		}
		return 0
	})
	unary("SIN", math.Sin)
	unary("SQRT", math.Sqrt)
	unary("SQUARE", func(x float64) float64 { return x * x })
	unary("TAN", math.Tan)
	unary("TRUNC", math.Trunc)
	register("ATN2", 2, 2, func(_ *evalCtx, a []value) value {
		x, ok1 := argNum(a, 0)
		y, ok2 := argNum(a, 1)
		if !ok1 || !ok2 {
			return undef
		}
		return numResult(math.Atan2(y, x))
	})
	register("LOG", 1, 2, func(_ *evalCtx, a []value) value {
		x, ok := argNum(a, 0)
		if !ok {
			return undef
		}
		if len(a) == 1 {
			return numResult(math.Log(x))
		}
		base, ok := argNum(a, 1)
		if !ok {
			return undef
		}
		return numResult(math.Log(x) / math.Log(base))
	})
	register("POWER", 2, 2, func(_ *evalCtx, a []value) value {
		x, ok1 := argNum(a, 0)
		y, ok2 := argNum(a, 1)
		if !ok1 || !ok2 {
			return undef
		}
		return numResult(math.Pow(x, y))
	})
	register("PI", 0, 0, func(*evalCtx, []value) value { return numV(math.Pi) })
	register("RAND", 0, 0, func(*evalCtx, []value) value { return numV(rand.Float64()) })
	register("NUMBERBIN", 1, 2, func(_ *evalCtx, a []value) value {
		x, ok := argNum(a, 0)
		if !ok {
			return undef
		}
		size := 1.0
		if len(a) > 1 {
			if size, ok = argNum(a, 1); !ok || size == 0 {
				return undef
			}
		}
		return numResult(math.Floor(x/size) * size)
	})
	intOp := func(name string, f func(x, y int64) (int64, bool)) {
		register(name, 2, 2, func(_ *evalCtx, a []value) value {
			x, ok1 := argInt(a, 0)
			y, ok2 := argInt(a, 1)
			if !ok1 || !ok2 {
				return undef
			}
			r, ok := f(x, y)
			if !ok {
				return undef
			}
			return numV(float64(r))
		})
	}
	intOp("INTADD", func(x, y int64) (int64, bool) { return x + y, true })
	intOp("INTSUB", func(x, y int64) (int64, bool) { return x - y, true })
	intOp("INTMUL", func(x, y int64) (int64, bool) { return x * y, true })
	intOp("INTDIV", func(x, y int64) (int64, bool) {
		if y == 0 {
			return 0, false
		}
		return x / y, true
	})
	intOp("INTMOD", func(x, y int64) (int64, bool) {
		if y == 0 {
			return 0, false
		}
		return x % y, true
	})
	intOp("INTBITAND", func(x, y int64) (int64, bool) { return x & y, true })
	intOp("INTBITOR", func(x, y int64) (int64, bool) { return x | y, true })
	intOp("INTBITXOR", func(x, y int64) (int64, bool) { return x ^ y, true })
	intOp("INTBITLEFTSHIFT", func(x, y int64) (int64, bool) {
		if y < 0 {
			return 0, false
		}
		return x << uint64(y), true
	})
	intOp("INTBITRIGHTSHIFT", func(x, y int64) (int64, bool) {
		if y < 0 {
			return 0, false
		}
		return x >> uint64(y), true
	})
	register("INTBITNOT", 1, 1, func(_ *evalCtx, a []value) value {
		x, ok := argInt(a, 0)
		if !ok {
			return undef
		}
		return numV(float64(^x))
	})
}
