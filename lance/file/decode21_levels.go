package file

import (
	"github.com/mvq-dev/mvq/lance/pb/enc21pb"
)

// Repetition and definition levels (2.1).
//
// A leaf column's page lists its layers innermost first: the leaf item, then
// each parent up to the top-level field (a struct is an item layer, a list a
// list layer). Def level 0 is "valid all the way"; each layer that can be
// null or empty takes the next levels, inner layers first: a nullable item or
// list one (null), an emptyable list one (empty), a list that can be both two
// (null, then empty). Rep level r > 0 starts a new list at the r-th list
// layer counted from the inside, so max rep (the number of list layers)
// starts a new row. Entries for null or empty lists carry no value; all other
// entries (valid and null items) have a value slot ("visible" items).

func layerDefs(l enc21pb.RepDefLayer) int {
	switch l {
	case enc21pb.RepDefLayer_REPDEF_NULLABLE_ITEM, enc21pb.RepDefLayer_REPDEF_NULLABLE_LIST, enc21pb.RepDefLayer_REPDEF_EMPTYABLE_LIST:
		return 1
	case enc21pb.RepDefLayer_REPDEF_NULL_AND_EMPTY_LIST:
		return 2
	}
	return 0
}

func layerIsList(l enc21pb.RepDefLayer) bool {
	switch l {
	case enc21pb.RepDefLayer_REPDEF_ALL_VALID_LIST, enc21pb.RepDefLayer_REPDEF_NULLABLE_LIST,
		enc21pb.RepDefLayer_REPDEF_EMPTYABLE_LIST, enc21pb.RepDefLayer_REPDEF_NULL_AND_EMPTY_LIST:
		return true
	}
	return false
}

func checkLayers(layers []enc21pb.RepDefLayer) error {
	if len(layers) == 0 || len(layers) > 64 {
		return corruptf("page with %d rep/def layers", len(layers))
	}
	for _, l := range layers {
		if l < enc21pb.RepDefLayer_REPDEF_ALL_VALID_ITEM || l > enc21pb.RepDefLayer_REPDEF_NULL_AND_EMPTY_LIST {
			return corruptf("unknown rep/def layer %v", l)
		}
	}
	if layerIsList(layers[0]) {
		return corruptf("innermost rep/def layer is a list")
	}
	return nil
}

func maxRep(layers []enc21pb.RepDefLayer) uint16 {
	var n uint16
	for _, l := range layers {
		if layerIsList(l) {
			n++
		}
	}
	return n
}

func maxDef(layers []enc21pb.RepDefLayer) uint16 {
	var n uint16
	for _, l := range layers {
		n += uint16(layerDefs(l))
	}
	return n
}

// maxVisibleDef is the highest def level that still has a value slot: the
// levels of the item layers below the innermost list.
func maxVisibleDef(layers []enc21pb.RepDefLayer) uint16 {
	var n uint16
	for _, l := range layers {
		if layerIsList(l) {
			break
		}
		n += uint16(layerDefs(l))
	}
	return n
}

// layerOut is one unraveled layer: n entries, their validity (nil when all
// valid), and for list layers n+1 offsets into the layer below.
type layerOut struct {
	list    bool
	n       int
	valid   []bool
	offsets []int64
}

// unravel turns the levels of one decoded slice into per-layer validity and
// offsets, innermost first. rep and def may be nil (no lists / no nulls);
// numItems is the number of visible items (values). The slice must start at
// a row boundary and hold whole rows. The levels are consumed.
func unravel(rep, def []uint16, layers []enc21pb.RepDefLayer, numItems int) ([]layerOut, error) {
	if rep != nil && def != nil && len(rep) != len(def) {
		return nil, corruptf("%d rep levels but %d def levels", len(rep), len(def))
	}
	md := maxDef(layers)
	for _, d := range def {
		if d > md {
			return nil, corruptf("def level %d over the maximum %d", d, md)
		}
	}
	mr := maxRep(layers)
	for _, r := range rep {
		if r > mr {
			return nil, corruptf("rep level %d over the maximum %d", r, mr)
		}
	}
	if mr > 0 && rep == nil {
		return nil, corruptf("list layers without repetition levels")
	}
	// levelRep[d] is the number of list layers below the layer that def
	// level d belongs to: the level is seen by item layers above that many
	// lists.
	levelRep := make([]uint16, 1, md+1)
	var lists uint16
	for _, l := range layers {
		switch {
		case l == enc21pb.RepDefLayer_REPDEF_NULLABLE_ITEM:
			levelRep = append(levelRep, lists)
		case layerIsList(l):
			lists++
			for k := 0; k < layerDefs(l); k++ {
				levelRep = append(levelRep, lists)
			}
		}
	}
	out := make([]layerOut, len(layers))
	var defCmp, repCmp uint16
	count := numItems // entries in the layer below the current one
	for li, l := range layers {
		if !layerIsList(l) {
			o := layerOut{n: count}
			if l == enc21pb.RepDefLayer_REPDEF_NULLABLE_ITEM {
				if def != nil {
					o.valid = make([]bool, 0, count)
					for _, d := range def {
						if levelRep[d] <= repCmp {
							o.valid = append(o.valid, d <= defCmp)
						}
					}
					if len(o.valid) != count {
						return nil, corruptf("layer %d has %d entries, expected %d", li, len(o.valid), count)
					}
				}
				defCmp++
			}
			out[li] = o
			continue
		}
		// A list layer.
		valid := defCmp
		var nullLevel, emptyLevel uint16
		switch l {
		case enc21pb.RepDefLayer_REPDEF_NULLABLE_LIST:
			nullLevel = valid + 1
			defCmp++
		case enc21pb.RepDefLayer_REPDEF_EMPTYABLE_LIST:
			emptyLevel = valid + 1
			defCmp++
		case enc21pb.RepDefLayer_REPDEF_NULL_AND_EMPTY_LIST:
			nullLevel, emptyLevel = valid+1, valid+2
			defCmp += 2
		}
		// Levels above this list's own that item layers directly above it
		// use (null structs) are still visible here: they make null lists.
		upper := max(valid, nullLevel, emptyLevel)
		visibleMax := upper
		for _, above := range layers[li+1:] {
			if above == enc21pb.RepDefLayer_REPDEF_NULLABLE_ITEM {
				visibleMax++
			} else if above != enc21pb.RepDefLayer_REPDEF_ALL_VALID_ITEM {
				break
			}
		}
		repCmp++
		o := layerOut{list: true}
		offsets := make([]int64, 0, len(rep)/2+1)
		var validity []bool
		if nullLevel != 0 || upper < visibleMax {
			validity = make([]bool, 0, len(rep)/2+1)
		}
		var cur int64
		w := 0
		for i, r := range rep {
			if r == 0 {
				cur++
				continue
			}
			var d uint16
			if def != nil {
				d = def[i]
				def[w] = d
			}
			rep[w] = r - 1
			w++
			switch {
			case d == 0:
				offsets = append(offsets, cur)
				cur++
				if validity != nil {
					validity = append(validity, true)
				}
			case d > visibleMax:
				// A null or empty list further out: not an entry here.
			case d == nullLevel || d > upper:
				offsets = append(offsets, cur)
				if validity != nil {
					validity = append(validity, false)
				}
			case d == emptyLevel:
				offsets = append(offsets, cur)
				if validity != nil {
					validity = append(validity, true)
				}
			default:
				// A valid list whose first item is null.
				offsets = append(offsets, cur)
				cur++
				if validity != nil {
					validity = append(validity, true)
				}
			}
		}
		if cur != int64(count) {
			return nil, corruptf("list layer %d covers %d entries, the layer below has %d", li, cur, count)
		}
		offsets = append(offsets, cur)
		rep = rep[:w]
		if def != nil {
			def = def[:w]
		}
		o.n = len(offsets) - 1
		o.offsets = offsets
		o.valid = validity
		out[li] = o
		count = o.n
	}
	return out, nil
}
