// Package script runs Cosmos DB server-side JavaScript — stored procedures,
// pre- and post-triggers and user-defined functions — on the goja engine.
//
// # The engine's side
//
// A script sees the database only through the Collection interface defined
// here, which the engine implements for the one logical partition the script
// runs in; every write goes into the caller's open transaction, and the
// caller commits it when the call succeeds and discards it when it returns an
// error. Errors from the Collection should implement StatusCoder: the script
// sees the status as err.number and the text as err.body. Everything this
// package returns is an *Error carrying the HTTP status to answer and a
// Cosmos-style message (Message: {"Errors":["Encountered exception while
// executing function. Exception = Error: …"]}); an exception whose number is
// a known HTTP status keeps that status, any other answers 400; the time
// budget answers 408. Documents cross the boundary as JSON bytes and are
// parsed and serialized inside the runtime.
//
// # The script's side
//
// getContext() with getCollection(), getRequest(), getResponse() and abort();
// the Collection methods (read, readDocuments, queryDocuments, create,
// upsert, replace, patch, delete, getSelfLink, getAltLink), whose callbacks
// run after the calling function returns, in the order the calls were made,
// and whose errors are thrown when no callback is given; the __ object (its
// prototype is the collection) with filter, map, pluck, sortBy,
// sortByDescending, flatten, unwind and chain()…value(); ErrorCodes;
// console.log with %s; and an Error constructor that also takes
// (number, message).
//
// # Limits
//
// Each run has a time budget (Limits.Timeout, enforced with goja's
// Interrupt and between queued operations); collection calls are refused
// (they return false) after Limits.AcceptFraction of it. The heap is watched
// while a script runs (see watchdog.go); built-ins that allocate in one
// native call in proportion to a number the script chooses (Array fill,
// join, from, the length-looping Array methods, String repeat, padStart,
// padEnd, split, Function.prototype.apply, Reflect.apply/construct,
// JSON.stringify) are bounded by the memory limit; binary arrays
// (ArrayBuffer, typed arrays, DataView) are absent. A string can only grow
// geometrically by operations that each make it in one uninterruptible copy,
// out of the watchdog's reach: the script's +, += and template literals are
// compiled into calls of natives (see rewrite.go) that stop the run with the
// memory-limit error before making a string longer than MaxMemory/2
// characters; concat, String.raw, replace and replaceAll (whose matches and
// $-patterns are counted beforehand), the case conversions, normalize,
// encodeURI(Component), escape, JSON.stringify and Array toLocaleString stop
// it, before where their arguments tell and otherwise once the string is
// made. Code made at run time by eval or the Function constructor is not
// rewritten, and a global regular expression's matches are not counted
// beforehand: the watchdog alone bounds them.
// The call depth is limited with SetMaxCallStackSize. There is no require,
// no timers and no Go object within reach; eval and Function work.
//
// # Speed and isolation
//
// Compiled programs are cached by script id and ETag. Runtimes are pooled:
// making one, with its built-ins materialized and frozen, takes about 10 ms,
// while a run on a pooled runtime takes tens of microseconds. A pooled
// runtime cannot leak state between runs: every built-in and API object
// reachable from the global object is frozen once (with the properties
// scripts commonly assign on their own objects, such as a prototype's name or
// toString, still assignable on inheriting objects), and each run gets a
// fresh global object whose prototype is the frozen one. A runtime that was
// interrupted, overflowed its stack, handed out eval, or ran longer than
// 100 ms is not reused; a replacement is made in the background.
//
// It must not import the engine, storage or server packages, nor anything
// else of this module: the engine imports it, never the other way round.
package script
