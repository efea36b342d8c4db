"""Statistics and previews of a captured tensor: computed where the tensor lives
(tensor_stats), in one pass by the compiled kernel on the CPU (fused, _cstats.c), on an idle
core while the forward goes on (deferred), within a size budget (previews).
"""
