package httpapi

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/mvq-dev/mvq/index"
)

// maxFtsDepth bounds the nesting of boost and boolean queries.
const maxFtsDepth = 16

// ftsQuery reads the spec's FtsQuery at path (exactly one of match,
// phrase, boost, multi_match, boolean); errors name the field.
func ftsQuery(raw json.RawMessage, path string, depth int) (*index.TextQuery, error) {
	if depth > maxFtsDepth {
		return nil, badInput("%s: nested more than %d deep", path, maxFtsDepth)
	}
	var forms map[string]json.RawMessage
	if err := json.Unmarshal(raw, &forms); err != nil || forms == nil {
		return nil, badInput("%s: want an object with one of match, phrase, boost, multi_match, boolean", path)
	}
	if len(forms) != 1 {
		return nil, badInput("%s: give exactly one of match, phrase, boost, multi_match, boolean (got %d fields)", path, len(forms))
	}
	var q index.TextQuery
	for form, body := range forms {
		p := path + "." + form
		switch form {
		case "match":
			mq, err := matchQuery(body, p)
			if err != nil {
				return nil, err
			}
			q.Match = &mq
		case "phrase":
			var pq struct {
				Terms  *string `json:"terms"`
				Column *string `json:"column"`
				Slop   *int32  `json:"slop"`
			}
			if err := decodeStrict(body, &pq); err != nil {
				return nil, badInput("%s: %v", p, err)
			}
			if pq.Terms == nil {
				return nil, badInput("%s.terms: required", p)
			}
			if pq.Column != nil && *pq.Column == "" {
				return nil, badInput("%s.column: empty (omit it to search every column with an INVERTED index)", p)
			}
			q.Phrase = &index.PhraseQuery{Terms: *pq.Terms}
			if pq.Column != nil {
				q.Phrase.Column = *pq.Column
			}
			if pq.Slop != nil {
				if *pq.Slop < 0 {
					return nil, badInput("%s.slop: must be at least 0 (got %d)", p, *pq.Slop)
				}
				q.Phrase.Slop = int(*pq.Slop)
			}
		case "boost":
			var bq struct {
				Positive      json.RawMessage `json:"positive"`
				Negative      json.RawMessage `json:"negative"`
				NegativeBoost *float64        `json:"negative_boost"`
			}
			if err := decodeStrict(body, &bq); err != nil {
				return nil, badInput("%s: %v", p, err)
			}
			if bq.Positive == nil || bq.Negative == nil {
				return nil, badInput("%s: positive and negative are required", p)
			}
			b := &index.BoostQuery{NegativeBoost: 0.5}
			if bq.NegativeBoost != nil {
				if *bq.NegativeBoost < 0 {
					return nil, badInput("%s.negative_boost: must be at least 0 (got %v)", p, *bq.NegativeBoost)
				}
				b.NegativeBoost = *bq.NegativeBoost
			}
			var err error
			if b.Positive, err = ftsQuery(bq.Positive, p+".positive", depth+1); err != nil {
				return nil, err
			}
			if b.Negative, err = ftsQuery(bq.Negative, p+".negative", depth+1); err != nil {
				return nil, err
			}
			q.BoostQ = b
		case "multi_match":
			var mm struct {
				MatchQueries []json.RawMessage `json:"match_queries"`
			}
			if err := decodeStrict(body, &mm); err != nil {
				return nil, badInput("%s: %v", p, err)
			}
			if len(mm.MatchQueries) == 0 {
				return nil, badInput("%s.match_queries: required, at least one", p)
			}
			q.Multi = []index.MatchQuery{}
			for i, r := range mm.MatchQueries {
				mq, err := matchQuery(r, p+".match_queries["+strconv.Itoa(i)+"]")
				if err != nil {
					return nil, err
				}
				q.Multi = append(q.Multi, mq)
			}
		case "boolean":
			var bq struct {
				Must    *[]json.RawMessage `json:"must"`
				Should  *[]json.RawMessage `json:"should"`
				MustNot *[]json.RawMessage `json:"must_not"`
			}
			if err := decodeStrict(body, &bq); err != nil {
				return nil, badInput("%s: %v", p, err)
			}
			b := &index.BoolQuery{}
			for _, l := range []struct {
				name string
				in   *[]json.RawMessage
				out  *[]*index.TextQuery
			}{{"must", bq.Must, &b.Must}, {"should", bq.Should, &b.Should}, {"must_not", bq.MustNot, &b.MustNot}} {
				if l.in == nil {
					return nil, badInput("%s.%s: required (may be empty)", p, l.name)
				}
				for i, r := range *l.in {
					k, err := ftsQuery(r, p+"."+l.name+"["+strconv.Itoa(i)+"]", depth+1)
					if err != nil {
						return nil, err
					}
					*l.out = append(*l.out, k)
				}
			}
			q.Bool = b
		default:
			return nil, badInput("%s: %q is not a query form (match, phrase, boost, multi_match, boolean)", path, form)
		}
	}
	return &q, nil
}

// matchQuery reads the spec's MatchQuery at path.
func matchQuery(raw json.RawMessage, path string) (index.MatchQuery, error) {
	var mq struct {
		Terms         *string  `json:"terms"`
		Column        *string  `json:"column"`
		Operator      string   `json:"operator"`
		Boost         *float64 `json:"boost"`
		Fuzziness     *int64   `json:"fuzziness"`
		MaxExpansions *int64   `json:"max_expansions"`
		PrefixLength  *int64   `json:"prefix_length"`
	}
	var out index.MatchQuery
	if err := decodeStrict(raw, &mq); err != nil {
		return out, badInput("%s: %v", path, err)
	}
	if mq.Terms == nil {
		return out, badInput("%s.terms: required", path)
	}
	if mq.Column != nil && *mq.Column == "" {
		return out, badInput("%s.column: empty (omit it to search every column with an INVERTED index)", path)
	}
	if mq.Fuzziness != nil && *mq.Fuzziness != 0 || mq.MaxExpansions != nil || mq.PrefixLength != nil {
		return out, badInput("%s: fuzzy matching (fuzziness, max_expansions, prefix_length) is not supported", path)
	}
	out.Terms = *mq.Terms
	if mq.Column != nil {
		out.Column = *mq.Column
	}
	switch strings.ToLower(mq.Operator) {
	case "", "or":
	case "and":
		out.And = true
	default:
		return out, badInput("%s.operator: %q (want And or Or)", path, mq.Operator)
	}
	if mq.Boost != nil {
		if *mq.Boost <= 0 {
			return out, badInput("%s.boost: must be positive", path)
		}
		out.Boost = *mq.Boost
	}
	return out, nil
}
