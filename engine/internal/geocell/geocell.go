// Package geocell is the cell hierarchy of the spatial index: the earth's
// longitudes and latitudes cut into quarters, level by level, down to
// MaxLevel (cells about 4 cm across). A cell's ID orders it so that every
// cell inside it has an ID in its Range: a covering of an item's geometry is
// written as terms, and a query region's covering finds them with one range
// scan per cell of the region plus one lookup per ancestor.
//
// An ID holds a cell's 2·level bits of interleaved longitude and latitude
// (longitude first), then a single 1 bit, then zeros: level 0 is the whole
// earth, 1<<60.
package geocell

import "math"

// MaxLevel is the deepest level.
const MaxLevel = 30

// ID names a cell.
type ID uint64

// Box is a box of longitudes and latitudes in degrees.
type Box struct{ West, South, East, North float64 }

func lsb(level int) uint64 { return 1 << (60 - 2*uint(level)) }

// FromCoords returns the cell of a level whose x (longitude) and y
// (latitude) indexes at that level are given.
func FromCoords(level int, x, y uint32) ID {
	var m uint64
	for i := level - 1; i >= 0; i-- {
		m = m<<2 | uint64(x>>uint(i)&1)<<1 | uint64(y>>uint(i)&1)
	}
	return ID(m<<(61-2*uint(level)) | lsb(level))
}

// Level returns a cell's level.
func (c ID) Level() int {
	t := uint64(c)
	n := 0
	for t&1 == 0 {
		t >>= 1
		n++
	}
	return (60 - n) / 2
}

// Parent returns the cell holding c one level up.
func (c ID) Parent() ID {
	l := c.Level()
	nl := lsb(l - 1)
	return ID(uint64(c)&^(2*nl-1) | nl)
}

// Range returns the lowest and highest IDs of the cells inside c, c
// included.
func (c ID) Range() (lo, hi ID) {
	l := lsb(c.Level())
	return c - ID(l) + 1, c + ID(l) - 1
}

// index returns the x or y index of a coordinate at a level.
func index(v, min, span float64, level int) uint32 {
	n := float64(uint64(1) << uint(level))
	i := math.Floor((v - min) / span * n)
	return uint32(math.Max(0, math.Min(n-1, i)))
}

// Leaf returns the deepest cell holding a position.
func Leaf(lon, lat float64) ID {
	return FromCoords(MaxLevel, index(lon, -180, 360, MaxLevel), index(lat, -90, 180, MaxLevel))
}

// Cover returns at most about max cells, all of one level, that together
// hold the box: the deepest level at which few enough do.
func Cover(b Box, max int) []ID {
	if b.West == b.East && b.South == b.North {
		return []ID{Leaf(b.West, b.South)}
	}
	level := 0
	for l := MaxLevel; l >= 0; l-- {
		nx := int64(index(b.East, -180, 360, l)) - int64(index(b.West, -180, 360, l)) + 1
		ny := int64(index(b.North, -90, 180, l)) - int64(index(b.South, -90, 180, l)) + 1
		if nx*ny <= int64(max) {
			level = l
			break
		}
	}
	x0, x1 := index(b.West, -180, 360, level), index(b.East, -180, 360, level)
	y0, y1 := index(b.South, -90, 180, level), index(b.North, -90, 180, level)
	out := make([]ID, 0, (x1-x0+1)*(y1-y0+1))
	for x := x0; x <= x1; x++ {
		for y := y0; y <= y1; y++ {
			out = append(out, FromCoords(level, x, y))
		}
	}
	return out
}

// Ancestors returns the cells holding c above it, from level 0 down.
func (c ID) Ancestors() []ID {
	l := c.Level()
	out := make([]ID, l)
	for i := l - 1; i >= 0; i-- {
		c = c.Parent()
		out[i] = c
	}
	return out
}
