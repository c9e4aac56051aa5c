"""NVIDIA Xid/SXid catalog and kernel-line decoding."""
