package refresh

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/mvq-dev/mvq/table"
)

// Manifest keys the engine owns.
const (
	propView             = table.ViewProperty      // Properties: the Definition
	propWatermark        = "mvq.watermark"         // Properties: the Watermark of the last refresh
	metaJobID            = "mvq.job_id"            // Metadata: the refresh job that made the version
	metaManifestChecksum = "mvq.manifest_checksum" // Metadata: the manifest the refresh ran with
	metaResult           = "mvq.result"            // Metadata: that job's Result (JSON)
)

// Watermark records what a view was last refreshed from; the next refresh
// diffs the source against it.
type Watermark struct {
	Source        []string `json:"source"`
	SourceVersion uint64   `json:"source_version"`
	// SourceBranch is the branch of the source SourceVersion is on ("":
	// main). Branches share fragment ids up to where they forked only, so
	// a refresh from another branch is a full recompute (branch.go).
	SourceBranch string `json:"source_branch,omitempty"`
	// SourceBranchID is that branch's identity (table.BranchInfo.ID): a
	// branch deleted and created again under the name is another line.
	SourceBranchID string `json:"source_branch_id,omitempty"`
	// SourceUUID is the source's identity (table.Table.Identity): a
	// source dropped and created again under the same name restarts its
	// fragment ids, so a different identity forces a full refresh.
	SourceUUID string `json:"source_uuid,omitempty"`
	// SourceCreated is what watermarks written before identities were
	// stored hold instead: the timestamp of the source's version 1. Read
	// only, through sourceIdentity.
	SourceCreated int64 `json:"source_created_millis,omitempty"`
	// Fragments are the source fragments of SourceVersion, all of them
	// expanded (or, past LimitCut, deliberately left out). Row-wise kinds.
	Fragments IDSet `json:"fragments,omitempty"`
	// OutputLimit is the output_limit the last refresh ran with (nil: none).
	OutputLimit *int64 `json:"output_limit,omitempty"`
	// LimitCut, when set, is the first source fragment some of whose view
	// rows output_limit left out; this and every later fragment may be
	// missing rows. Nil: every source fragment's rows are all in the view.
	LimitCut *uint32 `json:"limit_cut,omitempty"`
	// Lineage maps each view fragment to the source fragments its rows
	// come from (row-wise kinds), so a refresh rewrites only the view
	// fragments that hold rows of removed source fragments.
	Lineage []Lineage `json:"lineage,omitempty"`
}

// sourceIdentity is the identity of the source the watermark was made
// from: SourceUUID, or the legacy identity of SourceCreated for an older
// watermark; "" when it records neither (it then matches no source).
func (w *Watermark) sourceIdentity() string {
	switch {
	case w.SourceUUID != "":
		return w.SourceUUID
	case w.SourceCreated != 0:
		return table.LegacyIdentity(w.SourceCreated)
	}
	return ""
}

// compactLineage keeps a watermark's lineage true after table.Compact
// merged view fragments: a merged fragment draws from the union of its
// parts' source spans, which, the parts being adjacent in row order, is
// the span from the first part's Lo to the last part's Hi. A merge with a
// part of unknown lineage leaves the merged fragment without one (a
// refresh then reads it to see what it holds). Other fields are kept as
// they are.
func compactLineage(raw json.RawMessage, merges []table.Merge) (json.RawMessage, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	l, ok := doc["lineage"]
	if !ok {
		return raw, nil // no lineage: a refresh reads every fragment it must
	}
	var lineage []Lineage
	if err := json.Unmarshal(l, &lineage); err != nil {
		return nil, err
	}
	byFrag := make(map[uint32]Lineage, len(lineage))
	for _, l := range lineage {
		byFrag[l.Fragment] = l
	}
	for _, mg := range merges {
		merged, known := Lineage{Fragment: mg.To}, true
		for k, id := range mg.From {
			l, ok := byFrag[id]
			delete(byFrag, id)
			known = known && ok
			if k == 0 {
				merged.Lo, merged.Hi = l.Lo, l.Hi
			}
			merged.Lo, merged.Hi = min(merged.Lo, l.Lo), max(merged.Hi, l.Hi)
		}
		if known {
			byFrag[mg.To] = merged
		}
	}
	lineage = lineage[:0]
	for _, l := range byFrag {
		lineage = append(lineage, l)
	}
	slices.SortFunc(lineage, func(a, b Lineage) int { return cmp.Compare(a.Fragment, b.Fragment) })
	l, err := json.Marshal(lineage)
	if err != nil {
		return nil, err
	}
	doc["lineage"] = l
	return json.Marshal(doc)
}

// Lineage says view fragment Fragment holds rows derived from source
// fragments Lo..Hi only (rows are in source row address order, so these
// are the fragments of its first and last rows).
type Lineage struct {
	Fragment uint32 `json:"fragment"`
	Lo       uint32 `json:"lo"`
	Hi       uint32 `json:"hi"`
}

// Span is the range of source fragments [Lo, Hi] a staged view fragment's
// rows come from.
type Span struct {
	Lo uint32 `json:"lo"`
	Hi uint32 `json:"hi"`
}

// IDSet is a sorted set of fragment ids, stored as inclusive ranges
// ([[0,41],[43,97]]) because fragment ids are mostly consecutive.
type IDSet []uint32

// NewIDSet returns the sorted, deduplicated set of ids.
func NewIDSet(ids []uint32) IDSet {
	s := slices.Clone(ids)
	slices.Sort(s)
	return IDSet(slices.Compact(s))
}

// Has reports whether id is in the set.
func (s IDSet) Has(id uint32) bool {
	_, ok := slices.BinarySearch(s, id)
	return ok
}

// Minus returns the ids of s not in o.
func (s IDSet) Minus(o IDSet) IDSet {
	var out IDSet
	for _, id := range s {
		if !o.Has(id) {
			out = append(out, id)
		}
	}
	return out
}

// CountIn counts the ids of s in [lo, hi].
func (s IDSet) CountIn(lo, hi uint32) int {
	i, _ := slices.BinarySearch(s, lo)
	j, found := slices.BinarySearch(s, hi)
	if found {
		j++
	}
	return max(j-i, 0)
}

// MarshalJSON writes the set as inclusive ranges.
func (s IDSet) MarshalJSON() ([]byte, error) {
	ranges := [][2]uint32{}
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		ranges = append(ranges, [2]uint32{s[i], s[j]})
		i = j + 1
	}
	return json.Marshal(ranges)
}

// UnmarshalJSON reads inclusive ranges.
func (s *IDSet) UnmarshalJSON(b []byte) error {
	var ranges [][2]uint32
	if err := json.Unmarshal(b, &ranges); err != nil {
		return err
	}
	var out []uint32
	for _, r := range ranges {
		if r[1] < r[0] || (len(out) > 0 && r[0] <= out[len(out)-1]) {
			return fmt.Errorf("fragment ranges not sorted: %v", ranges)
		}
		for id := r[0]; ; id++ {
			out = append(out, id)
			if id == r[1] {
				break
			}
		}
	}
	*s = out
	return nil
}
