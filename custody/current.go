// Reading a declared file as it is now, for a per-key merge on the node.
package custody

import "bytes"

// Current returns the bytes of the file at path as it is now, with its
// state, read as Take reads it (never blocking, never following the last
// component, refusing a FIFO, a device or a huge file). A missing file is
// no error: it has no bytes. A symlink has none either: a per-key merge
// does not see through it. For node-local use only: never send the bytes
// to Temporal.
func (s *Store) Current(path string) ([]byte, FileState, error) {
	var buf bytes.Buffer
	st, _, err := s.read(path, &buf)
	if err != nil {
		return nil, st, err
	}
	if !st.Exists || st.Link != "" {
		return nil, st, nil
	}
	return buf.Bytes(), st, nil
}
