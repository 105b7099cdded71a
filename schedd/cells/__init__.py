"""Cells (issue 35 §4, the first step): which cell owns which partitions (the directory, kept in
etcd), this node's view of it, and the ids drawn so a job lands in its owner cell.

A cluster without `[cells]` never imports etcd's client and owns every partition."""
