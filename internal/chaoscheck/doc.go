// Package chaoscheck judges what a fault suite recorded: the history of
// every operation its clients made (and what each was told) and the state
// read back after the faults healed. It is pure (no I/O): the suite that
// drives real processes (test/e2e's chaos test) builds the History and the
// Final, and Check names every violation.
//
// The invariants it checks, each against the product's own promises
// (DESIGN.md I1–I10):
//   - settled: every run is terminal, or parked with every open ask
//     answerable by someone policy allows (no run hangs, no question
//     nobody can answer; I4, I5);
//   - acknowledged: every run a client was told it started exists, and
//     every decision a client was told succeeded is in that run's journal
//     (no acknowledged write lost; I3);
//   - effects: a side effect ran no more times than its journal recorded a
//     durable Start, those Starts number at most one more than the
//     in-doubt retries someone with authority answered, and it ran at
//     least as often as executors reported it succeeded (exactly once, and
//     at most once more per authorised retry; I1, I7);
//   - fenced: every lease, start and result journaled is of the step's
//     current attempt (a stale executor's word is refused; I7);
//   - honest: a start, or its retry with the same key, is never refused
//     NOT_FOUND (a refusal the client would read as "nothing started");
//   - single-use: each approval gate was decided at most once, checked as
//     linearizability of every ask's history (decisions and reads) with
//     porcupine (I2);
//   - audit: the control plane's own audit (hash chains, invariants) is
//     clean (I9).
package chaoscheck
