package query

// builtin is a system function: its arity and implementation. maxArgs is -1
// for variadic functions. Implementations never see undefined-count errors:
// the binder checks arity, and bad argument types yield undefined.
type builtin struct {
	name             string
	minArgs, maxArgs int
	fn               func(c *evalCtx, args []value) value
}

func (b *builtin) call(c *evalCtx, args []value) value { return b.fn(c, args) }

// builtins maps upper-case function names to their implementations.
var builtins = map[string]*builtin{}

// lookupBuiltin finds a system function by case-insensitive name without
// allocating for names of ordinary length.
func lookupBuiltin(name string) (*builtin, bool) {
	var buf [32]byte
	if len(name) > len(buf) {
		fn, ok := builtins[upper(name)]
		return fn, ok
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		buf[i] = c
	}
	fn, ok := builtins[string(buf[:len(name)])]
	return fn, ok
}

func register(name string, minArgs, maxArgs int, fn func(c *evalCtx, args []value) value) {
	builtins[upper(name)] = &builtin{name: name, minArgs: minArgs, maxArgs: maxArgs, fn: fn}
}

// Argument helpers: each reports false when the argument has the wrong type.

func argStr(args []value, i int) (string, bool) {
	if i >= len(args) || args[i].k != kString {
		return "", false
	}
	return args[i].str(), true
}

func argNum(args []value, i int) (float64, bool) {
	if i >= len(args) || args[i].k != kNumber {
		return 0, false
	}
	return args[i].n, true
}

// argInt returns an integral number argument.
func argInt(args []value, i int) (int64, bool) {
	f, ok := argNum(args, i)
	if !ok || !isInteger(f) || f > 9.2e18 || f < -9.2e18 {
		return 0, false
	}
	return int64(f), true
}

// argOptBool returns the optional boolean argument i (false when absent);
// ok is false when it is present but not a boolean.
func argOptBool(args []value, i int) (b, ok bool) {
	if i >= len(args) {
		return false, true
	}
	if args[i].k != kBool {
		return false, false
	}
	return args[i].b, true
}

func init() {
	register("IIF", 3, 3, func(_ *evalCtx, a []value) value {
		if a[0].isTrue() {
			return a[1]
		}
		return a[2]
	})
	register("CHOOSE", 2, -1, func(_ *evalCtx, a []value) value {
		i, ok := argInt(a, 0)
		if !ok || i < 1 || i >= int64(len(a)) {
			return undef
		}
		return a[i]
	})
}
