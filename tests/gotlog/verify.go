// Command verify checks tablectl's signed checkpoints, cosignatures and RFC 9162 proofs with
// Go's own code (golang.org/x/mod/sumdb/note and sumdb/tlog): someone else's implementation
// of the formats the journal's Merkle log follows (docs/journal.md).
//
// Input (JSON on stdin): the table's vkey, witnesses' cosigner keys, checks to make. Output
// (JSON on stdout): one verdict per check, "ok" or the error Go's code gave.
//
// sumdb's tree note ("go.sum database tree") differs from a C2SP checkpoint's origin line, so
// the checkpoint body is parsed here: origin, size, base64 root hash.
package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

type check struct {
	Kind       string   `json:"kind"` // "checkpoint", "inclusion", "consistency", "cosignature", "tree"
	Note       string   `json:"note"`
	OldNote    string   `json:"old_note"`
	Index      int64    `json:"index"`
	RowHash    string   `json:"row_hash"` // hex: the leaf's data (the row's 32-byte hash)
	Proof      []string `json:"proof"`    // base64 hashes
	Witness    string   `json:"witness"`  // a cosigner vkey (type 0x04)
	RowHashes  []string `json:"row_hashes"`
}

type input struct {
	TableKey string  `json:"table_key"`
	Checks   []check `json:"checks"`
}

type checkpoint struct {
	origin string
	size   int64
	root   tlog.Hash
}

func openCheckpoint(text string, verifier note.Verifier) (*checkpoint, error) {
	n, err := note.Open([]byte(text), note.VerifierList(verifier))
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSuffix(n.Text, "\n"), "\n")
	if len(lines) < 3 {
		return nil, errors.New("checkpoint: fewer than 3 lines")
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || (lines[1] != "0" && strings.HasPrefix(lines[1], "0")) {
		return nil, fmt.Errorf("checkpoint: bad size %q", lines[1])
	}
	raw, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(raw) != tlog.HashSize {
		return nil, fmt.Errorf("checkpoint: bad root hash %q", lines[2])
	}
	var root tlog.Hash
	copy(root[:], raw)
	return &checkpoint{lines[0], size, root}, nil
}

func hashes(list []string) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(list))
	for i, text := range list {
		raw, err := base64.StdEncoding.DecodeString(text)
		if err != nil || len(raw) != tlog.HashSize {
			return nil, fmt.Errorf("proof hash %d malformed", i)
		}
		copy(out[i][:], raw)
	}
	return out, nil
}

// cosignature checks a C2SP tlog-cosignature/v1 line on the note with crypto/ed25519 (x/mod's
// note knows signature type 0x01 only): key ID with type 0x04, timestamped message.
func cosignature(text string, vkey string) error {
	parts := strings.SplitN(vkey, "+", 3)
	if len(parts) != 3 {
		return errors.New("malformed cosigner key")
	}
	name := parts[0]
	key, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(key) != 33 || key[0] != 0x04 {
		return errors.New("not a cosignature/v1 key")
	}
	h := sha256.Sum256(append([]byte(name+"\n\x04"), key[1:]...))
	split := strings.LastIndex(text, "\n\n")
	if split < 0 {
		return errors.New("not a signed note")
	}
	body, sigs := text[:split+1], text[split+2:]
	for _, line := range strings.Split(strings.TrimSuffix(sigs, "\n"), "\n") {
		if !strings.HasPrefix(line, "— "+name+" ") {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(line[len("— "+name+" "):])
		if err != nil || len(raw) != 4+8+64 || !bytes.Equal(raw[:4], h[:4]) {
			continue
		}
		stamp := binary.BigEndian.Uint64(raw[4:12])
		message := fmt.Sprintf("cosignature/v1\ntime %d\n%s", stamp, body)
		if ed25519.Verify(ed25519.PublicKey(key[1:]), []byte(message), raw[12:]) {
			return nil
		}
		return errors.New("cosignature does not verify")
	}
	return errors.New("no cosignature by that key")
}

func run(in input, c check) error {
	verifier, err := note.NewVerifier(in.TableKey)
	if err != nil {
		return err
	}
	switch c.Kind {
	case "checkpoint":
		_, err := openCheckpoint(c.Note, verifier)
		return err
	case "cosignature":
		if _, err := openCheckpoint(c.Note, verifier); err != nil {
			return err
		}
		return cosignature(c.Note, c.Witness)
	case "inclusion":
		cp, err := openCheckpoint(c.Note, verifier)
		if err != nil {
			return err
		}
		data, err := hex.DecodeString(c.RowHash)
		if err != nil {
			return err
		}
		proof, err := hashes(c.Proof)
		if err != nil {
			return err
		}
		return tlog.CheckRecord(proof, cp.size, cp.root, c.Index, tlog.RecordHash(data))
	case "consistency":
		newer, err := openCheckpoint(c.Note, verifier)
		if err != nil {
			return err
		}
		older, err := openCheckpoint(c.OldNote, verifier)
		if err != nil {
			return err
		}
		if older.origin != newer.origin {
			return errors.New("checkpoints of two logs")
		}
		proof, err := hashes(c.Proof)
		if err != nil {
			return err
		}
		return tlog.CheckTree(proof, newer.size, newer.root, older.size, older.root)
	case "tree":
		// Go builds the tree from the rows itself (StoredHashes, TreeHash) and compares.
		cp, err := openCheckpoint(c.Note, verifier)
		if err != nil {
			return err
		}
		var stored []tlog.Hash
		reader := tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
			out := make([]tlog.Hash, len(indexes))
			for i, index := range indexes {
				out[i] = stored[index]
			}
			return out, nil
		})
		for i, text := range c.RowHashes {
			data, err := hex.DecodeString(text)
			if err != nil {
				return err
			}
			more, err := tlog.StoredHashes(int64(i), data, reader)
			if err != nil {
				return err
			}
			stored = append(stored, more...)
		}
		root, err := tlog.TreeHash(int64(len(c.RowHashes)), reader)
		if err != nil {
			return err
		}
		if int64(len(c.RowHashes)) != cp.size || root != cp.root {
			return errors.New("the rows' tree is not the checkpoint's")
		}
		return nil
	}
	return fmt.Errorf("unknown check %q", c.Kind)
}

func main() {
	var in input
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		fmt.Fprintln(os.Stderr, "input:", err)
		os.Exit(2)
	}
	verdicts := make([]string, len(in.Checks))
	for i, c := range in.Checks {
		if err := run(in, c); err != nil {
			verdicts[i] = err.Error()
		} else {
			verdicts[i] = "ok"
		}
	}
	json.NewEncoder(os.Stdout).Encode(verdicts)
}
