// Draws the API reference with Swagger UI from the document the page names. Nothing is asked of
// another host: no validator badge (Swagger UI's default sends the document to its own validator
// service), no fonts or logo of its own.
window.addEventListener("DOMContentLoaded", () => {
  const root = document.getElementById("swagger-ui");
  window.SwaggerUIBundle({
    url: root.dataset.url,
    domNode: root,
    validatorUrl: null,
    deepLinking: true,
    displayOperationId: false,
    displayRequestDuration: true,
    defaultModelsExpandDepth: 0,
    defaultModelExpandDepth: 3,
    docExpansion: "list",
    tryItOutEnabled: false,
    persistAuthorization: false,
  });
});
