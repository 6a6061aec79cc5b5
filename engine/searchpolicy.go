package engine

import (
	"encoding/json"
	"errors"

	"github.com/orrery-db/orrery/engine/internal/fulltext"
	"github.com/orrery-db/orrery/engine/internal/vector"
)

// SearchPolicy is a container's vector and full-text search policies, parsed
// and validated: vectorEmbeddingPolicy with indexingPolicy.vectorIndexes,
// fullTextPolicy with indexingPolicy.fullTextIndexes. The container's
// properties keep the policies as the client wrote them; this is what the
// engine computes with.
type SearchPolicy struct {
	// Vector holds the embeddings and the vector indexes; never nil.
	Vector *vector.Policy
	// FullText holds the full-text paths, their languages and which of
	// them a full-text index serves; never nil (a container without a
	// fullTextPolicy analyzes in en-US).
	FullText *fulltext.Policy
}

// HasVector reports whether the policy declares any vector embedding.
func (p *SearchPolicy) HasVector() bool { return p != nil && len(p.Vector.Embeddings) > 0 }

// HasFullText reports whether the policy declares any full-text path.
func (p *SearchPolicy) HasFullText() bool { return p != nil && len(p.FullText.Paths) > 0 }

// parseSearchPolicy reads the search policies out of a container's
// properties. It returns nil, nil when the container declares none.
func parseSearchPolicy(props map[string]any) (*SearchPolicy, *Error) {
	ip, _ := props["indexingPolicy"].(map[string]any)
	raw := func(m map[string]any, k string) json.RawMessage {
		if m == nil {
			return nil
		}
		v, ok := m[k]
		if !ok || v == nil {
			return nil
		}
		b, _ := json.Marshal(v)
		return b
	}
	var included []string
	if list, ok := ip["includedPaths"].([]any); ok {
		for _, e := range list {
			if entry, ok := e.(map[string]any); ok {
				if p, ok := entry["path"].(string); ok {
					included = append(included, p)
				}
			}
		}
	}
	vp, err := vector.ParsePolicy(raw(props, "vectorEmbeddingPolicy"), raw(ip, "vectorIndexes"), included)
	if err != nil {
		return nil, searchPolicyError(err)
	}
	fp, err := fulltext.ParsePolicy(raw(props, "fullTextPolicy"), raw(ip, "fullTextIndexes"))
	if err != nil {
		return nil, searchPolicyError(err)
	}
	if len(vp.Embeddings) == 0 && len(vp.Indexes) == 0 && len(fp.Paths) == 0 && props["fullTextPolicy"] == nil {
		return nil, nil
	}
	return &SearchPolicy{Vector: vp, FullText: fp}, nil
}

// checkSearchPolicy validates the search policies of a container body being
// created (prevProps nil) or replacing a container whose body is prevProps
// and whose parsed policies are prevSearch, with the service's rules and
// messages: the embeddings and vector indexes a container has cannot
// change on a replace (new ones may be added); its full-text policy and
// indexes may.
//
// A replace that leaves a policy out keeps the container's (as it does the
// unique key policy): a client that does not know the policies must not
// drop them by changing, say, the time to live.
func checkSearchPolicy(props, prevProps map[string]any, prevSearch *SearchPolicy) *Error {
	if prevProps != nil {
		keep(props, prevProps, "vectorEmbeddingPolicy")
		keep(props, prevProps, "fullTextPolicy")
		ip, _ := props["indexingPolicy"].(map[string]any)
		prevIP, _ := prevProps["indexingPolicy"].(map[string]any)
		if ip != nil && prevIP != nil {
			keep(ip, prevIP, "vectorIndexes")
			keep(ip, prevIP, "fullTextIndexes")
		}
	}
	sp, err := parseSearchPolicy(props)
	if err != nil {
		return err
	}
	if prevSearch == nil {
		return nil
	}
	next := &vector.Policy{}
	if sp != nil {
		next = sp.Vector
	}
	if err := vector.CheckReplace(prevSearch.Vector, next); err != nil {
		return searchPolicyError(err)
	}
	return nil
}

// keep copies prev[k] into props when props has no k.
func keep(props, prev map[string]any, k string) {
	if _, ok := props[k]; !ok {
		if v, ok := prev[k]; ok {
			props[k] = v
		}
	}
}

// searchPolicyError maps a leaf's policy error to the service's 400.
func searchPolicyError(err error) *Error {
	var ve *vector.PolicyError
	if errors.As(err, &ve) {
		return BadRequest("%s", ve.Message)
	}
	var fe *fulltext.PolicyError
	if errors.As(err, &fe) {
		return BadRequest("%s", fe.Message)
	}
	return BadRequest("%s", err.Error())
}
