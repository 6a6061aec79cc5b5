package query

// docsOf is a document source over literal JSON documents.
func docsOf(ds ...string) Docs {
	return func(yield func([]byte, error) bool) {
		for _, d := range ds {
			if !yield([]byte(d), nil) {
				return
			}
		}
	}
}
