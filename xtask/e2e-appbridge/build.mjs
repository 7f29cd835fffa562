// Bundles the AppBridge test host (`host.js` with ext-apps and the MCP client from
// node_modules) into one browser module: `node build.mjs OUT_DIR` writes OUT_DIR/host.js.
// Run by `cargo xtask e2e` from the folder it installed the packages in.
import { build } from "esbuild";

const out = process.argv[2];
if (!out) {
  console.error("usage: node build.mjs OUT_DIR");
  process.exit(2);
}
await build({
  entryPoints: ["host.js"],
  bundle: true,
  format: "esm",
  platform: "browser",
  target: "es2022",
  outfile: `${out}/host.js`,
  logLevel: "warning",
});
