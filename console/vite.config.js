// The console's build: a Preact single-page app into functions/console/static/console, and the
// API docs page (Swagger UI 5 from swagger-ui-dist, with our own initializer) into
// functions/console/static/docs. Relative asset links, so the pages work under any base path
// (API Gateway's stage, /v1/console/).
import { copyFileSync, mkdirSync } from "node:fs";
import { resolve } from "node:path";
import { defineConfig } from "vite";
import preact from "@preact/preset-vite";

const STATIC = resolve(import.meta.dirname, "../functions/console/static");
const SWAGGER = resolve(import.meta.dirname, "node_modules/swagger-ui-dist");

function docsPage() {
  return {
    name: "docs-page",
    closeBundle() {
      const out = resolve(STATIC, "docs");
      mkdirSync(out, { recursive: true });
      for (const name of ["swagger-ui-bundle.js", "swagger-ui.css"]) {
        copyFileSync(resolve(SWAGGER, name), resolve(out, name));
      }
      copyFileSync(resolve(SWAGGER, "LICENSE"), resolve(out, "LICENSE.txt"));
      for (const name of ["index.html", "init.js"]) {
        copyFileSync(resolve(import.meta.dirname, "docs", name), resolve(out, name));
      }
    },
  };
}

export default defineConfig({
  base: "./",
  plugins: [preact(), docsPage()],
  build: { outDir: resolve(STATIC, "console"), emptyOutDir: true, sourcemap: false },
});
