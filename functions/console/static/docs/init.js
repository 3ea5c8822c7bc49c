// The OpenAPI document sits beside this page's folder (../openapi.json); "try it out" calls the
// gateway at the same base (the document names no server: the stage's base path is added here).
(async () => {
  const base = new URL("../", window.location.href).href.replace(/\/$/, "");
  const answer = await fetch(new URL("../openapi.json", window.location.href));
  const spec = await answer.json();
  spec.servers = [{ url: base, description: "this gateway" }];
  window.ui = SwaggerUIBundle({ spec, dom_id: "#swagger-ui", deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis], layout: "BaseLayout", tryItOutEnabled: false,
    persistAuthorization: false });
})();
