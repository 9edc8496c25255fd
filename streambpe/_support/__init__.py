"""Plumbing shared by every stage: pools and the executor seam, atomic writes, progress, UTF-8.

Private, except :class:`~streambpe._support.executors.RayExecutor`, which the
package exports.
"""
