// njs middleware for the nginx peer: the value of X-Custom-Jsvm (js_set).
function header(r) {
    return "hello-from-jsvm";
}
export default { header };
