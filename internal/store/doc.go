// Package store defines how runs, asks, plans and the journal are kept:
// one small interface that every store implements and one conformance
// suite (storetest) that every store passes. A transition is committed
// atomically against the run's version; nothing is ever half-written.
//
// Invariants it enforces, and where (store.go):
//   - I3 a run holding a question is never terminal: a Commit carries the
//     run and the ask rows the transition changed, written in one atomic
//     write or not at all (Store.Commit, CheckCommit).
//   - I4 the store's clock judges deadlines: Commit.Deadline must still be
//     in the future by Store.Now when the commit lands, else ErrDeadline
//     and nothing is written.
//   - I8 the record is the truth: the journal is append-only and
//     hash-chained (Chain, HashRecord over freshness.JournalDigest); a
//     commit's records must end at the run's new head (CheckCommit) and
//     follow its stored one; VerifyChain finds the first altered record.
//   - Work is done by one replica at a time (work.go): a commit enqueues
//     and finishes work entries in the same atomic write as its run, and
//     ClaimWork never hands one entry to two claimers; hints are never
//     the source of truth.
package store
