package engine

// etagPath is the path the service excludes from every indexing policy.
const etagPath = "/\"_etag\"/?"

// excludeETag adds etagPath to the excluded paths of an indexing policy
// given by the client, as the service does (its SDKs' suites count the
// excluded paths it answers: the client's and this one), unless the policy
// indexes nothing or already lists it. A malformed excludedPaths is left to
// the policy's validation.
func excludeETag(ip map[string]any) {
	if mode, _ := ip["indexingMode"].(string); mode == "none" {
		return
	}
	paths, ok := ip["excludedPaths"].([]any)
	if !ok {
		return
	}
	for _, p := range paths {
		if m, ok := p.(map[string]any); ok && m["path"] == etagPath {
			return
		}
	}
	ip["excludedPaths"] = append(paths, map[string]any{"path": etagPath})
}
