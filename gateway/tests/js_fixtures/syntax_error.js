var broken = new TykJS.TykMiddleware.NewMiddleware({});

broken.NewProcessRequest(function (request) {
    return broken.ReturnData(request, {};
});
