package refresh

// SourceTable returns the identifier of the table a view's source_query
// reads: the same table CreateView resolves for it (both go through
// analyzeQuery), so a caller can check access to it before creating the
// view. Errors are CodeInvalidInput naming source_query.
func SourceTable(sourceQuery string) ([]string, error) {
	sq, err := analyzeQuery(sourceQuery, false)
	if err != nil {
		return nil, err
	}
	return sq.Source, nil
}
