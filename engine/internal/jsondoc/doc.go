// Package jsondoc is the engine's one model of a JSON document: how a
// document's bytes are read, checked, edited and written back.
//
// A document is valid JSON whose meaning does not depend on its reader:
// Check refuses numbers beyond the range of a double and objects that name
// a property twice.
//
// A document is kept in one of two forms of the same model, chosen by what
// its path needs:
//
//   - Object, its top-level properties in document order, each value left
//     as its raw JSON bytes (the write and read paths: an item's body, its
//     system properties, index, unique-key and spatial extraction). Parse
//     decodes nothing but the property names, and Encode writes the values
//     back byte for byte.
//   - a decoded tree (Decode, AppendValue) of nil, bool, json.Number,
//     string, []any and *Members, whose objects also keep their members in
//     document order (patch edits a document in this form).
//
// Both forms read property names the way encoding/json decodes them, keep
// the last value of a repeated name (in the place of its first, for the
// tree), and write strings with AppendString. The byte scanners (SkipSpace,
// SkipString, SkipValue) walk JSON already known valid.
//
// The system properties (IsSystem) are the names the service owns on every
// resource; a client's values for them are dropped (Object.WithoutSystem).
//
// The package knows bytes and values only, nothing of the engine. Its
// errors are plain errors; Check's text is the service's message, which the
// engine returns as a 400 BadRequest.
package jsondoc
