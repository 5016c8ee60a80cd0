package proxy

import (
	"net/http"
	"strings"
	"time"

	"github.com/memgate/memgate/internal/apierr"
	"github.com/memgate/memgate/internal/memory"
)

// The Anthropic Files API (beta files-api-2025-04-14; anthropic-beta
// passes through) under the operator's key. Every tenant's files —
// uploads, and what code execution wrote — are, to the provider, the
// operator's; memgate binds each to the tenant's user a reply gave it to
// (states.go: a code execution result's file_id, an upload's id) and
// forwards a request for one file only when it is bound to the caller,
// as it does a Messages request naming one. The list is refused: a page
// of it holds every tenant's files, and filtering it to the caller's
// would leave pages empty or short with cursors (first_id, last_id)
// naming others' files, and make a caller page through every tenant's
// files to find its own; a caller knows its files' ids from the replies
// that named them.

// filesPath is the Anthropic Files API.
const filesPath = "/v1/files"

// fileOp is what a Files API request does.
type fileOp int

const (
	fileList     fileOp = iota + 1 // GET /v1/files
	fileUpload                     // POST /v1/files
	fileMetadata                   // GET /v1/files/{file_id}
	fileContent                    // GET /v1/files/{file_id}/content
	fileDelete                     // DELETE /v1/files/{file_id}
)

// filesRoute reports what a request to the Files API does and the file
// it names (none for the list and an upload); false for any other
// request, one whose path is not in clean form (cleanPath) among them.
func filesRoute(r *http.Request) (fileOp, string, bool) {
	if !cleanPath(r) {
		return 0, "", false
	}
	if r.URL.Path == filesPath {
		switch r.Method {
		case http.MethodGet:
			return fileList, "", true
		case http.MethodPost:
			return fileUpload, "", true
		}
		return 0, "", false
	}
	rest, ok := strings.CutPrefix(r.URL.Path, filesPath+"/")
	id, tail, sub := strings.Cut(rest, "/")
	switch {
	case !ok || id == "":
	case !sub && r.Method == http.MethodGet:
		return fileMetadata, id, true
	case !sub && r.Method == http.MethodDelete:
		return fileDelete, id, true
	case tail == "content" && r.Method == http.MethodGet:
		return fileContent, id, true
	}
	return 0, "", false
}

// isFilesPath reports whether pth is the Files API's or under it.
func isFilesPath(pth string) bool {
	return pth == filesPath || strings.HasPrefix(pth, filesPath+"/")
}

// passFiles checks an Anthropic client's Files API request under the
// operator's key (op, id: filesRoute) for id, and sets f's binding of
// the file an upload's reply names: the file a request names must be
// id's (else the provider's 404 for a file it does not hold), the list
// is refused (filesNotListed).
func (p *Proxy) passFiles(r *http.Request, id memory.Identity, f *forward, op fileOp, file string) *apierr.Error {
	switch op {
	case fileList:
		return filesNotListed()
	case fileUpload:
		f.bind = p.newBind(f.x, id, memory.StateFile, time.Now())
		return nil
	case fileContent:
		f.download = true
	}
	return p.checkStates(r.Context(), id, []memory.ProviderState{{Kind: memory.StateFile, ID: file}}, nil, nil, unknownFile, nil)
}

// unknownFile is the provider's answer to a Files API request naming a
// file it does not hold.
func unknownFile(s memory.ProviderState) *apierr.Error {
	return &apierr.Error{Status: http.StatusNotFound, Type: "not_found_error", Message: "File with id '" + s.ID + "' not found."}
}

// filesNotListed answers a request for the list of files under the
// operator's key.
func filesNotListed() *apierr.Error {
	return &apierr.Error{Status: http.StatusForbidden, Type: apierr.TypePermission, Code: "route_not_allowed",
		Message: "This gateway does not list files: the provider's list holds every tenant's files. Read a file of yours by the id the reply that made it, or its upload, gave (GET /v1/files/{file_id}, /v1/files/{file_id}/content)."}
}
