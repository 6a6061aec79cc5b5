package script

import (
	"context"
	"encoding/json"
)

// Collection is the one logical partition a script runs in, implemented by the
// engine. Every write it makes goes into the caller's open transaction; the
// caller commits it when the script succeeds and discards it when the script
// returns an error.
//
// Document links are passed on exactly as the script gave them, after this
// package has checked that they lie inside this collection: either the
// name-based link AltLink()+"/docs/<id>" or the RID link
// SelfLink()+"docs/<rid>/" (with or without a leading or trailing slash). The
// engine resolves them. Errors should implement StatusCoder; the script sees
// the status as err.number and the text as err.body.
type Collection interface {
	// SelfLink returns the RID link of the collection, "dbs/<dbrid>/colls/<collrid>/".
	SelfLink() string
	// AltLink returns the name-based link, "dbs/<db>/colls/<coll>".
	AltLink() string
	// ReadDocument reads one document. When opts.IfNoneMatch matches its ETag
	// the engine returns an error with status 304.
	ReadDocument(ctx context.Context, link string, opts ReadOptions) (json.RawMessage, error)
	// ReadDocuments reads one page of the partition's documents.
	ReadDocuments(ctx context.Context, opts FeedOptions) (Page, error)
	// QueryDocuments runs a SQL query over the partition and returns one page.
	QueryDocuments(ctx context.Context, query Query, opts FeedOptions) (Page, error)
	// CreateDocument inserts a document (409 if its id exists) and returns it
	// with its system properties.
	CreateDocument(ctx context.Context, doc json.RawMessage, opts WriteOptions) (json.RawMessage, error)
	// UpsertDocument inserts or replaces a document and returns it.
	UpsertDocument(ctx context.Context, doc json.RawMessage, opts WriteOptions) (json.RawMessage, error)
	// ReplaceDocument replaces the document at link and returns the new version.
	ReplaceDocument(ctx context.Context, link string, doc json.RawMessage, opts WriteOptions) (json.RawMessage, error)
	// PatchDocument applies a patch specification (a JSON array of operations
	// or an object {"operations": [...], "condition": "..."}) and returns the
	// patched document.
	PatchDocument(ctx context.Context, link string, patch json.RawMessage, opts WriteOptions) (json.RawMessage, error)
	// DeleteDocument deletes the document at link.
	DeleteDocument(ctx context.Context, link string, opts WriteOptions) error
}

// ReadOptions are the options of readDocument.
type ReadOptions struct {
	// IfNoneMatch is an ETag; when it matches, the read answers 304.
	IfNoneMatch string
}

// WriteOptions are the options of the write methods.
type WriteOptions struct {
	// IfMatch is the ETag the document must still have (options.etag in the
	// script); empty means unconditional.
	IfMatch string
	// IndexAction is "default", "include" or "exclude" as given by the script,
	// or empty.
	IndexAction string
}

// FeedOptions are the paging options of readDocuments and queryDocuments.
type FeedOptions struct {
	// PageSize is the maximum number of documents to return (default 100;
	// -1 means as many as the engine allows).
	PageSize int
	// Continuation is the token returned with the previous page, or empty.
	Continuation string
}

// Page is one page of a feed.
type Page struct {
	// Documents are the results, each a JSON value.
	Documents []json.RawMessage
	// Continuation is the token for the next page, empty on the last one.
	Continuation string
}

// Query is a SQL query with its parameters.
type Query struct {
	// Text is the SQL text.
	Text string
	// Parameters are the values of the @names used in Text.
	Parameters []Param
}

// Param is one query parameter.
type Param struct {
	// Name is the parameter name including its '@'.
	Name string
	// Value is the parameter value as JSON.
	Value json.RawMessage
}
