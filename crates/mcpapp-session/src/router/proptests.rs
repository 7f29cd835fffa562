//! Property tests of the routing core (written below).
