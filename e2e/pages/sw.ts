// The service worker of the e2e pages: the library's script, served by Vite as a module.
import '../../src/service-worker';
