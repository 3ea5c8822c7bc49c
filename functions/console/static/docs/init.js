// The OpenAPI document sits beside this page's folder (../openapi.json); "try it out" calls the
// gateway at the same base (the document names no server: the stage's base path is added here).
(async () => {
  const base = new URL("../", window.location.href).href.replace(/\/$/, "");
  const answer = await fetch(new URL("../openapi.json", window.location.href));
  const spec = await answer.json();
  spec.servers = [{ url: base, description: "this gateway" }];
  // Tags start collapsed: with every one of its 130-odd operations open at once, Swagger UI 5.35
  // stops drawing part-way through the first tag (no error shown); a tag opened draws whole.
  window.ui = SwaggerUIBundle({ spec, dom_id: "#swagger-ui", deepLinking: true, docExpansion: "none",
    presets: [SwaggerUIBundle.presets.apis], layout: "BaseLayout", tryItOutEnabled: false,
    persistAuthorization: false });
})();
