// mcpapp host page script (the full page arrives with issue 7).
"use strict";
