// Package maintain is a writer's table maintenance: the scheduler that runs snapshot expiry, manifest rewrites,
// compactions and conversions of equality deletes after the writer's commits (Maintainer), the background runner
// that writes compactions and conversions off the commit path and re-bases the deletes committed meanwhile, the
// conversion of equality deletes into position deletes or deletion vectors, and the removal of orphan files.
//
// It is given an Env of functions by the writer (its transaction helper, its commit queue, the key index's hooks,
// its logger and events) and never reaches into the writer's state: the public API (Writer.Compact,
// ConvertEqualityDeletes, RemoveOrphanFiles) stays in the root package, over this one.
package maintain
