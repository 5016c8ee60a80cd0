package upstreamtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// FilesBeta is the anthropic-beta value the Anthropic Files API requires.
const FilesBeta = "files-api-2025-04-14"

// File is one file the fake Anthropic Files API holds.
type File struct {
	ID, Filename, MimeType string
	Content                []byte
	// Body, when set, writes the content instead of Content (a download
	// too large to hold, or one written in steps); Size is then its
	// length.
	Body func(w http.ResponseWriter)
	Size int64
}

// Files is a fake of the Anthropic Files API (beta files-api-2025-04-14)
// speaking its wire format: GET /v1/files (a page of file objects),
// POST /v1/files (multipart upload of "file"), GET /v1/files/{id} (a file
// object), GET /v1/files/{id}/content (the bytes), DELETE
// /v1/files/{id} (file_deleted). A request without the beta in
// anthropic-beta is a 400, an unknown id a 404, both in Anthropic's error
// shape.
type Files struct {
	mu    sync.Mutex
	files map[string]File
	order []string
	n     int
}

// NewFiles returns a Files API holding files.
func NewFiles(files ...File) *Files {
	f := &Files{files: map[string]File{}}
	for _, fl := range files {
		f.add(fl)
	}
	return f
}

func (f *Files) add(fl File) {
	if fl.Body == nil {
		fl.Size = int64(len(fl.Content))
	}
	f.files[fl.ID] = fl
	f.order = append(f.order, fl.ID)
}

// AnthropicError writes an Anthropic-shaped error of typ with status.
func AnthropicError(w http.ResponseWriter, status int, typ, message string) {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": message}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// fileObject is fl's metadata as the API gives it.
func fileObject(fl File) map[string]any {
	return map[string]any{"type": "file", "id": fl.ID, "filename": fl.Filename, "mime_type": fl.MimeType,
		"size_bytes": fl.Size, "created_at": "2026-12-03T07:00:00Z", "downloadable": true}
}

func writeJSON(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

func (f *Files) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.Contains(r.Header.Get("Anthropic-Beta"), FilesBeta) {
		AnthropicError(w, http.StatusBadRequest, "invalid_request_error", "The Files API is in beta: send anthropic-beta: "+FilesBeta+".")
		return
	}
	rest, _ := strings.CutPrefix(r.URL.Path, "/v1/files")
	id, tail, _ := strings.Cut(strings.TrimPrefix(rest, "/"), "/")
	f.mu.Lock()
	fl, ok := f.files[id]
	f.mu.Unlock()
	switch {
	case rest == "" && r.Method == http.MethodGet:
		f.mu.Lock()
		data := make([]any, 0, len(f.order))
		for _, id := range f.order {
			data = append(data, fileObject(f.files[id]))
		}
		first, last := "", ""
		if len(f.order) > 0 {
			first, last = f.order[0], f.order[len(f.order)-1]
		}
		f.mu.Unlock()
		writeJSON(w, map[string]any{"data": data, "first_id": first, "last_id": last, "has_more": false})
	case rest == "" && r.Method == http.MethodPost:
		file, hdr, err := r.FormFile("file")
		if err != nil {
			AnthropicError(w, http.StatusBadRequest, "invalid_request_error", "file: "+err.Error())
			return
		}
		b, _ := io.ReadAll(file)
		f.mu.Lock()
		f.n++
		fl := File{ID: fmt.Sprintf("file_up%d", f.n), Filename: hdr.Filename, MimeType: hdr.Header.Get("Content-Type"), Content: b, Size: int64(len(b))}
		f.add(fl)
		f.mu.Unlock()
		writeJSON(w, fileObject(fl))
	case !ok:
		AnthropicError(w, http.StatusNotFound, "not_found_error", "File not found: "+id)
	case tail == "" && r.Method == http.MethodGet:
		writeJSON(w, fileObject(fl))
	case tail == "" && r.Method == http.MethodDelete:
		f.mu.Lock()
		delete(f.files, id)
		f.order = slices.DeleteFunc(f.order, func(s string) bool { return s == id })
		f.mu.Unlock()
		writeJSON(w, map[string]any{"id": id, "type": "file_deleted"})
	case tail == "content" && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", fl.MimeType)
		if fl.Body != nil {
			fl.Body(w)
			return
		}
		w.Write(fl.Content)
	default:
		AnthropicError(w, http.StatusNotFound, "not_found_error", "Not found")
	}
}
