package postgres

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
)

// release hands the table's held changes (a deferrable key's, see liveTable.deferred) to its builder by their
// net effect per key, at the transaction's end.
func (s *liveState) release(ctx context.Context, lt *liveTable) error {
	if len(lt.held) == 0 {
		lt.heldEmptied = false
		return nil
	}
	out, err := netChanges(lt.held, len(lt.cols), lt.keyIdx, lt.heldEmptied)
	lt.held, lt.heldEmptied = nil, false
	if err != nil {
		return fmt.Errorf("postgres: table %s: %w", lt.t, err)
	}
	for _, c := range out {
		if err := s.appendChange(lt, c.op, c.vals, nil); err != nil {
			return err
		}
	}
	if lt.b.rows >= s.p.cfg.BatchRows {
		return s.applyPending(ctx, lt)
	}
	return nil
}

// netChange is a key's net effect in a transaction: "insert" of the row it ends with, or "delete" of the key
// (vals: the key columns', the others null).
type netChange struct {
	op   string
	vals [][]byte
}

// keyRows is what a transaction did to one key: the rows it created there that are still alive (indexes in
// held, oldest first), and whether the row the key had before the transaction is gone (destroyed, or known
// absent).
type keyRows struct {
	key     [][]byte // the key columns' values, for a delete
	alive   []int
	preGone bool
}

// netChanges reduces one transaction's changes of a table to their net effect per key, in the order keys first
// appear. The transaction is a multiset of rows: each insert and update creates a row, each update and delete
// destroys one, named by its old row. Within a transaction a DEFERRABLE key may hold two rows at once (after
// UPDATE t SET id = id + 1 moved row 1 onto key 2, and before it moves row 2 away), so a destroy is matched by
// content: with REPLICA IDENTITY FULL the old row is whole, and it destroys the row created in the transaction
// that equals it, else the row the key had before. An old row of the key only (REPLICA IDENTITY DEFAULT, which
// setup refuses for a deferrable key unless the table's identity changed since) cannot tell two rows of its key
// apart: it destroys the created row when the key's earlier row is gone, and is an error when both may be
// alive. ncols is the table's columns; emptied: the table was truncated before the changes (no key has a row
// before).
func netChanges(held []heldChange, ncols int, keyIdx []int, emptied bool) ([]netChange, error) {
	byKey := map[string]*keyRows{}
	var order []*keyRows
	var kb []byte
	rows := func(vals [][]byte) *keyRows {
		kb = kb[:0]
		key := make([][]byte, len(keyIdx))
		for j, k := range keyIdx {
			kb = binary.AppendVarint(kb, int64(len(vals[k])))
			kb = append(kb, vals[k]...)
			key[j] = vals[k]
		}
		kr := byKey[string(kb)]
		if kr == nil {
			kr = &keyRows{key: key, preGone: emptied}
			byKey[string(kb)] = kr
			order = append(order, kr)
		}
		return kr
	}
	destroy := func(kr *keyRows, old [][]byte, whole bool) error {
		if whole {
			for i := len(kr.alive) - 1; i >= 0; i-- {
				if sameValues(held[kr.alive[i]].vals, old) {
					kr.alive = append(kr.alive[:i], kr.alive[i+1:]...)
					return nil
				}
			}
		} else if len(kr.alive) > 0 {
			if !kr.preGone {
				return fmt.Errorf("a transaction moved rows onto key %s while it held a row (a DEFERRABLE key), and the stream's old rows carry the key only, which cannot tell the two apart: set REPLICA IDENTITY FULL on the table (and leave Config.KeepReplicaIdentity unset)",
					keyString(kr.key))
			}
			kr.alive = kr.alive[:len(kr.alive)-1]
			return nil
		}
		if kr.preGone {
			return fmt.Errorf("the stream destroys a row of key %s that the table does not hold", keyString(kr.key))
		}
		kr.preGone = true
		return nil
	}
	for i, c := range held {
		switch c.op {
		case "delete":
			if err := destroy(rows(c.old), c.old, c.oldWhole); err != nil {
				return nil, err
			}
		case "update":
			if c.old != nil {
				if err := destroy(rows(c.old), c.old, c.oldWhole); err != nil {
					return nil, err
				}
			} else if err := destroy(rows(c.vals), nil, false); err != nil { // the key did not change
				return nil, err
			}
			fallthrough
		case "insert":
			kr := rows(c.vals)
			kr.alive = append(kr.alive, i)
		}
	}
	out := make([]netChange, 0, len(order))
	for _, kr := range order {
		switch {
		case len(kr.alive) > 1:
			return nil, fmt.Errorf("a transaction ends with %d rows of key %s", len(kr.alive), keyString(kr.key))
		case len(kr.alive) == 1:
			out = append(out, netChange{op: "insert", vals: held[kr.alive[0]].vals})
		case kr.preGone:
			vals := make([][]byte, ncols)
			for j, k := range keyIdx {
				vals[k] = kr.key[j]
			}
			out = append(out, netChange{op: "delete", vals: vals})
		}
	}
	return out, nil
}

func sameValues(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if (a[i] == nil) != (b[i] == nil) || !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// keyString shows a key's binary values for an error.
func keyString(key [][]byte) string {
	return fmt.Sprintf("%x", key)
}
