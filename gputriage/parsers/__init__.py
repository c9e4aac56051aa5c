"""Pure text parsers: raw outputs in, structured records out. No I/O."""
