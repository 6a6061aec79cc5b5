package server

import "github.com/orrery-db/orrery/server/explorer"

// explorerHandler serves the data explorer's static files. It holds no
// credential and reads no data: the page calls the REST API, which
// authenticates and authorizes each of its requests like any client's.
var explorerHandler = explorer.Handler()
